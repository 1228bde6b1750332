//! Links from a Markdown file to the charts: relative to the file's own folder (how GitHub and
//! every viewer resolve them), never to the working directory the command ran in.

use std::path::{Component, Path, PathBuf};

/// A link target safe inside `![..](..)`: spaces and parentheses would end the link early.
pub fn escape(target: &str) -> String {
    target
        .replace(' ', "%20")
        .replace('(', "%28")
        .replace(')', "%29")
}

/// The link from a Markdown file in `dir` to `target`, with `/` separators and escaped; both
/// must exist (they are resolved through the file system, symlinks and `..` included). Falls
/// back to the absolute path when no relative one exists (another drive on Windows).
pub fn relative(dir: &Path, target: &Path) -> String {
    let resolve = |p: &Path| {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        p.canonicalize().unwrap_or_else(|_| absolute(p))
    };
    let (from, to) = (resolve(dir), resolve(target));
    let from: Vec<Component> = from.components().collect();
    let to_parts: Vec<Component> = to.components().collect();
    let common = from
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    if common == 0 {
        return escape(&to.to_string_lossy());
    }
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(
        to_parts[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    escape(&parts.join("/"))
}

/// The folder a file sits in ("." for a bare file name).
pub fn folder_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::env::current_dir()
        .map(|cwd| cwd.join(p))
        .unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_to_the_markdown_folder() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let md = dir.path().join("reports/deep");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&md).unwrap();
        let png = out.join("ratio (1).png");
        std::fs::write(&png, b"x").unwrap();
        assert_eq!(relative(&out, &png), "ratio%20%281%29.png");
        assert_eq!(relative(&md, &png), "../../out/ratio%20%281%29.png");
        // The same folder spelled another way resolves to the same place.
        assert_eq!(relative(&md.join(".."), &png), "../out/ratio%20%281%29.png");
        assert_eq!(folder_of(Path::new("verdict.md")), PathBuf::from("."));
        assert_eq!(folder_of(Path::new("a/verdict.md")), PathBuf::from("a"));
    }
}
