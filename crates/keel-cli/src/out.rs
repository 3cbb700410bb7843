//! stdout without panics: `println!` panics when stdout is closed (`keel sessions show
//! ID --raw | head -1`); these end keel quietly instead, as a pipe's reader expects.

use std::io::Write;

/// The exit status when stdout was closed by its reader (128 + SIGPIPE, what a program
/// killed by the signal reports).
pub const CLOSED_STDOUT: i32 = 141;

/// Writes `text` and a newline to stdout.
pub fn print(text: &str) {
    write(&format!("{text}\n"));
}

/// Writes `text` to stdout and flushes it; leaves quietly if stdout is closed.
pub fn write(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let result = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    if let Err(e) = result {
        closed(&e);
    }
}

/// Leaves quietly when `e` says the reader went away; other errors are logged.
pub fn closed(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        crate::typing::restore();
        std::process::exit(CLOSED_STDOUT);
    }
    tracing::warn!("cannot write to stdout: {e}");
}

/// `println!` that leaves quietly when stdout is closed.
macro_rules! outln {
    () => {
        $crate::out::write("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::print(&format!($($arg)*))
    };
}

/// `print!` (flushed) that leaves quietly when stdout is closed.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(&format!($($arg)*))
    };
}

/// `eprintln!` that never panics: a closed stderr (`keel … 2>&1 | head -1`) loses the
/// line, nothing more.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` (flushed) that never panics.
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, $($arg)*);
        let _ = stderr.flush();
    }};
}
