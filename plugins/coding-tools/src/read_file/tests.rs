//! Numbering against the plain way of doing it (the whole file checked as
//! UTF-8, every line numbered one by one), on texts whose lines end near
//! the 16-byte copy boundaries, at the end of the buffer, with CR LF,
//! invalid UTF-8, long lines and no final newline, for many windows.

use super::{Numbered, number_lines};

/// The plain way: what `read_file` answered before lines were counted
/// and copied in bulk.
fn plain(bytes: &[u8], offset: usize, limit: usize) -> Numbered {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') {
        lines.pop();
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(&format!("{:>6}\t", i + 1));
        if line.len() > super::MAX_LINE {
            out.push_str(&line[..line.floor_char_boundary(super::MAX_LINE)]);
            out.push_str("… [line cut at 2000 characters]");
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    Numbered {
        text: out,
        total: lines.len(),
    }
}

fn texts() -> Vec<Vec<u8>> {
    let mut texts: Vec<Vec<u8>> = Vec::new();
    // Every line length from 0 to 40 around the 16-byte chunks, with and
    // without a final newline.
    let mut lengths = Vec::new();
    for len in 0..=40 {
        lengths.extend_from_slice(format!("{}\n", "x".repeat(len)).as_bytes());
    }
    texts.push(lengths.clone());
    lengths.pop();
    texts.push(lengths);
    for len in 0..=40 {
        texts.push("y".repeat(len).into_bytes());
        texts.push(format!("a\n{}", "z".repeat(len)).into_bytes());
    }
    texts.push(b"one\r\ntwo\r\n\r\nthree\r".to_vec());
    texts.push(b"bad \xff\xfe bytes\nok line\n\xc3\n\xe2\x82 cut\n".to_vec());
    texts.push(
        "héllo wörld ✓ 16 bytes of ü\n漢字の行です。\n"
            .as_bytes()
            .to_vec(),
    );
    let mut long = "é".repeat(1500);
    long.push('\n');
    long.push_str(&"w".repeat(2001));
    long.push_str("\nshort\n");
    texts.push(long.into_bytes());
    // Cuts: at a character that goes on past byte 2000, exactly 2000
    // bytes (not cut), and a long line with invalid UTF-8 in it.
    texts.push(format!("a{}\nnext\n", "é".repeat(1500)).into_bytes());
    texts.push(format!("{}\n{}\n", "x".repeat(2000), "x".repeat(2001)).into_bytes());
    let mut invalid_long = b"\xff".to_vec();
    invalid_long.extend("x".repeat(2100).bytes());
    invalid_long.extend(b"\n\xe2\x82");
    invalid_long.extend("ü".repeat(1200).bytes());
    texts.push(invalid_long);
    texts.push(b"\n\n\n".to_vec());
    let mut many = String::new();
    for i in 0..1_000_123 % 997 {
        many.push_str(&format!("line {i} {}\n", "·".repeat(i % 23)));
    }
    texts.push(many.into_bytes());
    texts
}

#[test]
fn numbered_lines_are_what_the_plain_way_gives_for_every_window() {
    // An empty file is answered before numbering.
    for bytes in texts().into_iter().filter(|b| !b.is_empty()) {
        let lines = plain(&bytes, 1, usize::MAX).total;
        for offset in [1, 2, 3, 7, 16, 17, lines, lines + 1] {
            for limit in [1, 2, 5, 16, 100, usize::MAX] {
                let ours = number_lines(&bytes, offset, limit);
                let expected = plain(&bytes, offset, limit);
                assert_eq!(ours.total, expected.total, "{bytes:?} from {offset}");
                if offset <= expected.total {
                    assert_eq!(
                        ours.text, expected.text,
                        "{bytes:?} from {offset}, {limit} lines"
                    );
                }
            }
        }
    }
}
