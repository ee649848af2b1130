import ProvisionCLI

#if canImport(Glibc)
import Glibc
#endif

let code = await ProvisionCLI.main(Array(CommandLine.arguments.dropFirst()))
exit(code)
