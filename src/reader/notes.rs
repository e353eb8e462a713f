//! What a pcapng file says about itself in words: the capturing application, OS and hardware,
//! interface names and descriptions, and comments on the section, interfaces and packets
//! (pcapng §4.1 shb_hardware, shb_os, shb_userappl; §4.2 if_name, if_description; §3.5
//! opt_comment). These strings come from whoever wrote the file: each is cut to
//! `MAX_TEXT_CHARS` characters with control and bidirectional-formatting characters removed,
//! and at most `MAX_NOTES` of each kind are kept, so a report can show them as plain text.

/// Characters kept of one string; longer ones end in "…".
pub const MAX_TEXT_CHARS: usize = 256;
/// Strings kept of each kind (comments, interfaces, packet comments).
pub const MAX_NOTES: usize = 16;

/// One interface as its IDB describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InterfaceNote {
    pub name: Option<String>,
    pub description: Option<String>,
    pub linktype: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CaptureNotes {
    pub hardware: Option<String>,
    pub os: Option<String>,
    pub application: Option<String>,
    /// Comments on sections and interfaces, in file order.
    pub comments: Vec<String>,
    pub interfaces: Vec<InterfaceNote>,
    /// (frame number, comment) of the first packets that carry one.
    pub packet_comments: Vec<(u64, String)>,
    /// Every packet comment, kept or not.
    pub packet_comments_total: u64,
}

impl CaptureNotes {
    pub fn add_comment(&mut self, raw: &[u8]) {
        if let Some(text) = clean_text(raw) {
            if self.comments.len() < MAX_NOTES {
                self.comments.push(text);
            }
        }
    }

    pub fn add_interface(&mut self, note: InterfaceNote) {
        if self.interfaces.len() < MAX_NOTES {
            self.interfaces.push(note);
        }
    }

    pub fn add_packet_comment(&mut self, frame: u64, raw: &[u8]) {
        if self.packet_comments.len() < MAX_NOTES {
            if let Some(text) = clean_text(raw) {
                self.packet_comments_total += 1;
                self.packet_comments.push((frame, text));
            }
        } else if has_text(raw) {
            // Past the ones kept, only counted: whether cleaning would leave anything.
            self.packet_comments_total += 1;
        }
    }
}

/// A string from the capture, safe to show: UTF-8 (invalid bytes replaced), trailing NULs
/// dropped, control characters (newlines and escapes included) and the invisible formatting
/// characters that reorder or hide text (U+200B..U+200F, U+202A..U+202E, U+2060..U+2069, U+FEFF)
/// turned into spaces, runs of spaces made one, and at most `MAX_TEXT_CHARS` characters.
/// `None` when nothing is left.
pub fn clean_text(raw: &[u8]) -> Option<String> {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let text = String::from_utf8_lossy(raw.get(..end).unwrap_or_default());
    let mut out = String::new();
    let mut chars = 0usize;
    let mut last_space = true;
    for c in text.chars() {
        let c = if c.is_control() || is_invisible_format(c) { ' ' } else { c };
        if c.is_whitespace() {
            if last_space {
                continue;
            }
            last_space = true;
            out.push(' ');
        } else {
            last_space = false;
            out.push(c);
        }
        chars += 1;
        if chars == MAX_TEXT_CHARS {
            out = out.trim_end().to_string();
            out.push('…');
            return Some(out);
        }
    }
    let out = out.trim_end();
    (!out.is_empty()).then(|| out.to_string())
}

/// Whether `clean_text(raw)` is `Some`: a character it keeps as it is.
fn has_text(raw: &[u8]) -> bool {
    String::from_utf8_lossy(raw).chars().any(|c| !(c.is_control() || is_invisible_format(c) || c.is_whitespace()))
}

fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clean_text_removes_controls_and_bidi_and_collapses_spaces() {
        assert_eq!(clean_text(b"eth0\0\0\0"), Some("eth0".into()));
        assert_eq!(clean_text(b"a\x1b[31mred\x1b[0m\r\nb\tc"), Some("a [31mred [0m b c".into()));
        assert_eq!(clean_text("evil\u{202e}txt.exe".as_bytes()), Some("evil txt.exe".into()));
        assert_eq!(clean_text(b"\n\t \0"), None);
        assert_eq!(clean_text(b"\xff\xfeok"), Some("\u{fffd}\u{fffd}ok".into()));
    }

    #[test]
    fn test_clean_text_keeps_markup_for_the_renderers_to_escape() {
        let script = b"<script>document.title='pwned'</script> | `x` [bold]";
        assert_eq!(clean_text(script).as_deref(), Some("<script>document.title='pwned'</script> | `x` [bold]"));
    }

    #[test]
    fn test_clean_text_caps_length() {
        let long = "x".repeat(10_000);
        let text = clean_text(long.as_bytes()).unwrap();
        assert_eq!(text.chars().count(), MAX_TEXT_CHARS + 1);
        assert!(text.ends_with('…'));
    }

    #[test]
    fn test_has_text_is_whether_clean_text_leaves_any() {
        let samples: [&[u8]; 9] = [b"", b"\0\0", b"\n\t \0", b"\xe2\0", b"\xff", "\u{200b}\u{feff} ".as_bytes(), b" a ", b"ok\0\0", b"\x1b"];
        for raw in samples {
            assert_eq!(has_text(raw), clean_text(raw).is_some(), "{raw:?}");
        }
    }

    #[test]
    fn test_notes_keep_at_most_max_notes_and_count_all_packet_comments() {
        let mut notes = CaptureNotes::default();
        for i in 0..100u64 {
            notes.add_packet_comment(i, if i % 2 == 0 { b"hello" } else { b" \0" });
            notes.add_comment(b"c");
        }
        assert_eq!(notes.packet_comments.len(), MAX_NOTES);
        assert_eq!(notes.packet_comments_total, 50);
        assert_eq!(notes.comments.len(), MAX_NOTES);
    }
}
