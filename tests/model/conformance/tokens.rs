//! The fencing tokens of the two sides, matched by order, not by value.
//!
//! The model's clock floor is `tick * 1000` µs and the server's is its own clock, so the values
//! differ; what the safety contract rests on is their order. Each pair (model token, real token)
//! seen in an answer, a message or a lock hash is kept, and a new pair must sit in the same place
//! in both orders: equal to the same earlier tokens, above and below the same ones.

/// The pairs of tokens seen so far, model token to real token.
#[derive(Debug, Default)]
pub struct TokenPairs {
    pairs: Vec<(u64, u64)>,
}

impl TokenPairs {
    /// Records that the model's `model` is the server's `real`, or says why they cannot be;
    /// whether the pair is new.
    pub fn observe(&mut self, model: u64, real: u64) -> Result<bool, String> {
        for &(m, r) in &self.pairs {
            if m.cmp(&model) != r.cmp(&real) {
                return Err(format!(
                    "token order differs: model {model} is {:?} model {m}, but real {real} is \
                     {:?} real {r}",
                    model.cmp(&m),
                    real.cmp(&r)
                ));
            }
        }
        let new = !self.pairs.iter().any(|&(m, _)| m == model);
        if new {
            self.pairs.push((model, real));
        }
        Ok(new)
    }
}

#[test]
fn tokens_in_another_order_are_refused() {
    let mut pairs = TokenPairs::default();
    assert_eq!(pairs.observe(1, 1_700_000_000_000_000), Ok(true));
    assert_eq!(pairs.observe(65, 1_700_000_000_000_900), Ok(true));
    assert_eq!(pairs.observe(65, 1_700_000_000_000_900), Ok(false));
    // a re-entry's token equal to the hold's on one side only
    assert!(pairs.observe(65, 1_700_000_000_000_950).is_err());
    // a fresh token above every earlier one on the server, below one in the model
    assert!(pairs.observe(30, 1_700_000_000_001_000).is_err());
}
