//! The example's `bank.proto`, as the descriptor that gRPC reflection serves (what `protoc` would
//! write into a descriptor set): `grpcurl` lists and calls the service without the file.

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
    MethodDescriptorProto, ServiceDescriptorProto,
};

/// `package bank;` with its two messages and its one service.
pub fn bank() -> FileDescriptorSet {
    let request = message(
        "DepositRequest",
        [("account", Type::Uint64), ("amount", Type::Int64)],
    );
    let reply = message(
        "DepositReply",
        [("balance", Type::Int64), ("fencing_token", Type::Uint64)],
    );
    let deposit = MethodDescriptorProto {
        name: Some("Deposit".into()),
        input_type: Some(".bank.DepositRequest".into()),
        output_type: Some(".bank.DepositReply".into()),
        ..Default::default()
    };
    let service = ServiceDescriptorProto {
        name: Some("Bank".into()),
        method: vec![deposit],
        ..Default::default()
    };
    let file = FileDescriptorProto {
        name: Some("bank.proto".into()),
        package: Some("bank".into()),
        syntax: Some("proto3".into()),
        message_type: vec![request, reply],
        service: vec![service],
        ..Default::default()
    };
    FileDescriptorSet { file: vec![file] }
}

/// A message whose fields are numbered from 1 in order.
fn message<const N: usize>(name: &str, fields: [(&str, Type); N]) -> DescriptorProto {
    let field = |(number, (name, kind)): (usize, (&str, Type))| FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number as i32 + 1),
        label: Some(Label::Optional as i32),
        r#type: Some(kind as i32),
        json_name: Some(name.into()),
        ..Default::default()
    };
    DescriptorProto {
        name: Some(name.into()),
        field: fields.into_iter().enumerate().map(field).collect(),
        ..Default::default()
    }
}
