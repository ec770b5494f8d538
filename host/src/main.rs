fn main() -> std::process::ExitCode {
    // SIGPIPE stays ignored (Rust's default): a provider or a program that
    // closes its end while sandcrab still writes is an error to report, not
    // a signal that ends sandcrab without a word. When the reader of
    // sandcrab's own output goes away (`sandcrab plugins inspect x | head`),
    // `cli::terminal` ends quietly, as other Unix tools do.
    sandcrab::cli::main()
}
