fn main() -> std::process::ExitCode {
    sandcrab::cli::main()
}
