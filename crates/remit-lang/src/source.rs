//! Source files and spans. A span is a byte range in one file of a [`SourceMap`].

/// Identifies a file of a [`SourceMap`].
pub type FileId = u32;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span { file, start: start as u32, end: end as u32 }
    }

    /// The smallest span covering `self` and `other` (same file).
    pub fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The name shown to users and recorded in decisions (relative to the policy root).
    pub name: String,
    pub text: String,
    /// The byte offset of each line's start, so that [`SourceMap::line_col`] is a binary search, not a scan of the
    /// file (a compiled policy records the location of every rule).
    line_starts: Vec<u32>,
}

/// Every file of a policy set, the standard library first.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let text = text.into();
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i as u32 + 1)).collect();
        self.files.push(SourceFile { name: name.into(), text, line_starts });
        (self.files.len() - 1) as FileId
    }

    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id as usize]
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (i as FileId, f))
    }

    pub fn find(&self, name: &str) -> Option<FileId> {
        self.files.iter().position(|f| f.name == name).map(|i| i as FileId)
    }

    /// The text a span covers.
    pub fn snippet(&self, span: Span) -> &str {
        &self.file(span.file).text[span.start as usize..span.end as usize]
    }

    /// 1-based line and column (in characters) of a span's start.
    pub fn line_col(&self, span: Span) -> (usize, usize) {
        let file = self.file(span.file);
        let line = file.line_starts.partition_point(|&start| start <= span.start);
        let line_start = file.line_starts[line - 1] as usize;
        let col = file.text[line_start..span.start as usize].chars().count() + 1;
        (line, col)
    }

    /// `file:line:column` of a span's start.
    pub fn location(&self, span: Span) -> String {
        let (line, col) = self.line_col(span);
        format!("{}:{}:{}", self.file(span.file).name, line, col)
    }
}
