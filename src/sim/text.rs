//! The text of the simulator's output tokens: one word per token, the same words for the
//! same token positions, so a request's whole answer is known from its length (the prefix
//! cache keeps a finished answer by the text the client received).

const WORDS: &[&str] = &[
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "runs", "far",
    "into", "green", "hills", "while", "birds", "sing", "soft", "songs",
];

/// Text of output tokens `start..start + n`: n words, each followed by a space.
pub fn token_text(start: u32, n: u32) -> String {
    let mut s = String::new();
    for i in start..start + n {
        s.push_str(WORDS[i as usize % WORDS.len()]);
        s.push(' ');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_text_has_one_word_per_token() {
        assert_eq!(token_text(0, 3).split_whitespace().count(), 3);
        assert!(token_text(5, 2).ends_with(' '));
    }
}
