import Foundation
import Testing

/// The man page and the shell completions come from swift-argument-parser's own generators, and the
/// Dockerfile installs them. There is no Docker engine here, so the image is checked by what can be:
/// the binary gives the generators what they read, the scripts they make parse, and the Dockerfile
/// makes and installs each where its tool looks.
@Suite("Man page and shell completions from swift-argument-parser's generators, installed by the Dockerfile")
struct ManualAndCompletionsTests {
    static let subcommands = [
        "demo", "migrate", "import", "run", "backfill", "status", "report", "analytics", "check", "deliver",
        "copy-database", "extend",
    ]

    @Test("the binary dumps the command tree the manual generator reads: every subcommand, with its help")
    func manualInput() async throws {
        let dump = try await CLI.run(["--experimental-dump-help"])
        #expect(dump.status == 0, "\(dump.stderr)")
        let tree = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let command = try #require(tree["command"] as? [String: Any])
        #expect(command["commandName"] as? String == "renewal")
        let children = (command["subcommands"] as? [[String: Any]] ?? []).compactMap { $0["commandName"] as? String }
        #expect(Set(Self.subcommands).isSubset(of: Set(children)), "\(children)")
        #expect((command["discussion"] as? String ?? "").contains("Exit codes:"), "the page carries the exit codes")
    }

    @Test("bash, zsh and fish completion scripts are generated, name every subcommand, and bash parses its own")
    func completions() async throws {
        for shell in ["bash", "zsh", "fish"] {
            let script = try await CLI.run(["--generate-completion-script", shell])
            #expect(script.status == 0, "\(shell): \(script.stderr)")
            for subcommand in Self.subcommands {
                #expect(script.stdout.contains(subcommand), "the \(shell) script does not complete \(subcommand)")
            }
            if shell == "bash" {
                let file = try CLI.temporaryDirectory() + "/renewal.bash"
                try script.stdout.write(toFile: file, atomically: true, encoding: .utf8)
                let check = try await runProgram("/bin/bash", ["-n", file], environment: ["PATH": "/usr/bin:/bin"])
                #expect(check.status == 0, "bash -n: \(check.stderr)")
            }
        }
    }

    @Test(
        "the Dockerfile makes the man page with the generate-manual plugin and the three completion scripts, and installs them"
    )
    func dockerfileInstallsThem() throws {
        let text = try DeployFiles.text("Deploy/Dockerfile").replacingOccurrences(of: "\\\n", with: " ")
        #expect(try DeployFiles.text("Package.swift").contains("apple/swift-argument-parser"))
        #expect(text.contains("swift package generate-manual"))
        #expect(
            text.contains(
                "install -D -m 0644 .build/plugins/GenerateManual/outputs/renewal/renewal.1 /out/usr/share/man/man1/renewal.1"
            ))
        for (shell, path) in [
            ("bash", "/out/usr/share/bash-completion/completions/renewal"),
            ("zsh", "/out/usr/share/zsh/vendor-completions/_renewal"),
            ("fish", "/out/usr/share/fish/vendor_completions.d/renewal.fish"),
        ] {
            #expect(text.contains("renewal --generate-completion-script \(shell) > \(path)"), "\(shell)")
        }
        #expect(text.contains("COPY --from=build /out/usr/share/ /usr/share/"))
    }
}
