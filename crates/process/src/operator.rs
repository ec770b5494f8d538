//! Programs the operator runs through sandcrab for themselves, outside
//! every sandbox: their web browser, to sign in. Only the operator's own
//! commands start one (`sandcrab mcp login`), never a model, a tool or a
//! server; it gets the operator's environment and none of sandcrab's
//! descriptors beyond stdio (they are close-on-exec, see
//! [`crate::harden_host`]).

/// Open `url` in the operator's browser: `$BROWSER` when it is set (as
/// other command-line tools read it: a list of commands split by `:`,
/// the first used; `%s` in it stands for the URL, else the URL is its
/// last argument). False when `$BROWSER` is not set or did not start, and
/// the caller shows the URL instead.
pub fn open_in_browser(url: &str) -> bool {
    let Some(browser) = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
    else {
        return false;
    };
    let command = browser.split(':').next().unwrap_or_default().trim();
    // The URL travels as a positional parameter, never inside the script.
    let script = if command.contains("%s") {
        command.replace("%s", "\"$1\"")
    } else {
        format!("{command} \"$1\"")
    };
    std::process::Command::new("/bin/sh")
        .args(["-c", &script, "sandcrab-browser", url])
        .stdin(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
