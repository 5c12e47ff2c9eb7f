//! Long lists a page at a time, newest first: each page link names the last row of the page
//! before it (`?before=<id>`), so rows added meanwhile never shift a page.

/// Keys on a page of the keys list, and lines on a page of the audit log.
pub const PAGE_SIZE: u32 = 50;

/// A page of a list: its rows, and where the next (older) page starts.
pub struct Paged<T> {
    pub rows: Vec<T>,
    /// Whether this is not the first page.
    pub later: bool,
    /// The id the next page starts after, when there are more.
    pub older: Option<String>,
}

impl<T> Paged<T> {
    /// `rows` as read with one more than [`PAGE_SIZE`]: the extra row says there are more.
    pub fn of(mut rows: Vec<T>, later: bool, id: impl Fn(&T) -> String) -> Self {
        let older = (rows.len() > PAGE_SIZE as usize).then(|| {
            rows.truncate(PAGE_SIZE as usize);
            rows.last().map(&id)
        });
        Self {
            rows,
            later,
            older: older.flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extra_row_says_there_is_an_older_page_and_is_not_shown() {
        let full: Vec<u32> = (0..=PAGE_SIZE).collect();
        let page = Paged::of(full, false, u32::to_string);
        assert_eq!(page.rows.len(), PAGE_SIZE as usize);
        assert_eq!(page.older.as_deref(), Some("49"), "the last row shown");
        let last: Vec<u32> = (0..PAGE_SIZE).collect();
        let page = Paged::of(last, true, u32::to_string);
        assert_eq!(page.rows.len(), PAGE_SIZE as usize);
        assert_eq!(page.older, None, "exactly a page: nothing older");
        assert!(page.later);
    }
}
