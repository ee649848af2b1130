/// The `provision` command line. `main` parses arguments, runs a command and returns its exit code.
public enum ProvisionCLI {
    public static func main(_ arguments: [String]) async -> Int32 {
        print("provision")
        return 0
    }
}
