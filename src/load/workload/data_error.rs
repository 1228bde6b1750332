//! Errors about data files a profile names (a dataset, a trace, a prompts file), in words
//! that quote none of the file.

/// What was wrong at a JSON error's place, in words that quote none of the file.
/// serde_json's own message quotes the value it met (`invalid type: string "..."`), and a
/// profile may name any file as its dataset (a file of keys, a token cache): its text must
/// not reach stderr or a CI log. Callers add the place (line, column) and the shape expected.
pub fn json_problem(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let message = e.to_string();
    match e.classify() {
        Category::Io => "the file could not be read".into(),
        // Syntax messages name the rule broken ("expected value", "trailing comma"), never
        // the text: kept, without serde_json's own place.
        Category::Syntax | Category::Eof => {
            let code = message
                .rsplit_once(" at line ")
                .map_or(&*message, |(c, _)| c);
            format!("not valid JSON ({code})")
        }
        Category::Data => {
            for prefix in ["invalid type: ", "invalid value: "] {
                if let Some(rest) = message.strip_prefix(prefix) {
                    let word = rest.split([' ', ',']).next().unwrap_or("");
                    return match kind_word(word) {
                        Some(kind) => format!("found {kind}"),
                        None => "found a value of another kind".into(),
                    };
                }
            }
            // Field names in these messages are this program's, not the file's.
            if let Some(rest) = message.strip_prefix("missing field `") {
                let name = rest.split('`').next().unwrap_or("");
                if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return format!("found an object without the field `{name}`");
                }
            }
            "found a value of another kind".into()
        }
    }
}

/// serde's word for a kind of JSON value, as a phrase ("a string"); None for another word.
fn kind_word(word: &str) -> Option<&'static str> {
    Some(match word {
        "string" => "a string",
        "integer" => "an integer",
        "floating" => "a number",
        "boolean" => "a boolean",
        "null" => "null",
        "sequence" => "an array",
        "map" => "an object",
        _ => return None,
    })
}
