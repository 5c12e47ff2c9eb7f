//! What `posture sync` says of a file it cannot use, as `posture` prints an error: the
//! whole chain of causes, each once.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use posture_cli::mirror::Mirror;

#[test]
fn a_file_that_cannot_be_opened_is_said_once_with_its_path() {
    let path = std::env::temp_dir()
        .join(format!("posture-no-such-dir-{}", std::process::id()))
        .join("copy.db");
    let err = Mirror::open(&path).err().unwrap();
    let said = format!("{:#}", anyhow::Error::from(err));
    assert!(said.starts_with(&path.display().to_string()), "{said}");
    assert_eq!(
        said.matches("unable to open database file").count(),
        1,
        "{said}"
    );
}
