import Foundation
import Testing

/// The deploy templates carry every credential today's job reads, each as a file next to the shared
/// secret (the App Store Server API's .p8 key and the webhook signing secret) and the key's ids as
/// settings, ready to uncomment; no template ever holds a secret's value.
@Suite("Deploy templates: the Server API key and the webhook secret as files, next to the shared secret")
struct DeploySecretFilesTests {
    static let templates = [
        "Deploy/systemd/renewal.service", "Deploy/systemd/renewal-backfill.service",
        "Deploy/systemd/renewal.env.example",
        "Deploy/kubernetes/cronjob.yaml", "Deploy/kubernetes/cronjob-parallel.yaml",
        "Deploy/kubernetes/backfill-cronjob.yaml", "Deploy/kubernetes/secret.example.yaml", "crontab.example",
    ]

    /// `text` with its commented settings switched on: `#Key=` lines of a unit, `# NAME=` lines of an
    /// environment file or crontab, and YAML lines whose comment is a list item, a nested key or a
    /// variable (`# - name:`, `#   value:`, `# APPSTORE_KEY_ID: "…"`). Prose comments stay comments.
    static func uncommented(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            if let match = line.wholeMatch(of: /#([A-Z][A-Za-z]+=.*)/) { return String(match.output.1) }
            if let match = line.wholeMatch(of: /# ([A-Z][A-Z_]+=.*)/) { return String(match.output.1) }
            if let match = line.wholeMatch(of: /(\s*)# ((?:- |  +[a-zA-Z]+:|[A-Z][A-Z_]+: ).*)/) {
                return String(match.output.1) + String(match.output.2)
            }
            return String(line)
        }.joined(separator: "\n")
    }

    @Test("no template holds a secret's value: keys and secrets are always files")
    func noSecretValues() throws {
        for template in Self.templates {
            let text = try DeployFiles.text(template)
            for forbidden in ["APPSTORE_PRIVATE_KEY=", "RENEWAL_WEBHOOK_SECRET=", "BEGIN PRIVATE KEY", "whsec_"] {
                #expect(!text.contains(forbidden), "\(template) holds \(forbidden)")
            }
        }
    }

    @Test("systemd: the key and the webhook secret are credentials beside the shared secret, named by *_FILE variables")
    func systemdCredentials() throws {
        for name in ["renewal.service", "renewal-backfill.service"] {
            let settings = DeployFilesTests.serviceSettings(
                Self.uncommented(try DeployFiles.text("Deploy/systemd/" + name)))
            let credentials = Dictionary(
                (settings["LoadCredential"] ?? []).map { entry -> (String, String) in
                    let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
                    return (parts[0], parts.count > 1 ? parts[1] : "")
                }, uniquingKeysWith: { $1 })
            let environment = Dictionary(
                (settings["Environment"] ?? []).map { entry -> (String, String) in
                    let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                    return (parts[0], parts.count > 1 ? parts[1] : "")
                }, uniquingKeysWith: { $1 })
            for variable in ["APPSTORE_SHARED_SECRET_FILE", "APPSTORE_PRIVATE_KEY_FILE", "RENEWAL_WEBHOOK_SECRET_FILE"]
            {
                let value = try #require(environment[variable], "\(name) has no \(variable) to uncomment")
                let credential = try #require(
                    value.firstMatch(of: /^%d\/([a-z-]+)$/).map { String($0.output.1) },
                    "\(name): \(variable)=\(value) is not a credential file")
                let source = try #require(credentials[credential], "\(name) loads no credential \(credential)")
                #expect(source.hasPrefix("/etc/renewal/"), "\(name): \(credential) from \(source)")
            }
        }
        let example = DeploySandbox.environmentFile(
            Self.uncommented(try DeployFiles.text("Deploy/systemd/renewal.env.example")))
        for variable in ["APPSTORE_KEY_ID", "APPSTORE_ISSUER_ID", "RENEWAL_WEBHOOK_URL"] {
            #expect(example[variable] != nil, "renewal.env.example has no \(variable) to uncomment")
        }
    }

    @Test("crontab.example: the key and the webhook secret as files beside the shared secret's")
    func crontabFiles() throws {
        let text = Self.uncommented(try DeployFiles.text("crontab.example"))
        for variable in ["APPSTORE_SHARED_SECRET_FILE", "APPSTORE_PRIVATE_KEY_FILE", "RENEWAL_WEBHOOK_SECRET_FILE"] {
            let line = text.split(separator: "\n").first { $0.hasPrefix(variable + "=") }
            #expect(
                line?.contains("=/etc/renewal/") == true, "crontab.example: \(variable) is not a file in /etc/renewal")
        }
    }

    @Test(
        """
        Kubernetes: uncommented, each CronJob's APPSTORE_PRIVATE_KEY_FILE and RENEWAL_WEBHOOK_SECRET_FILE name files \
        its Secret volume mounts, and the ConfigMap holds the key's ids and the webhook URL
        """,
        .enabled(if: DeployFiles.hasPyYAML, "python3-yaml is not installed (Debian package python3-yaml)"))
    func kubernetesFiles() throws {
        let directory = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func documents(_ file: String) throws -> [[String: Any]] {
            let path = directory + "/" + file
            try Self.uncommented(try DeployFiles.text("Deploy/kubernetes/" + file)).write(
                toFile: path, atomically: true, encoding: .utf8)
            return try DeployFiles.yamlDocuments(atPath: path)
        }
        let configMap = try #require(
            try documents("secret.example.yaml").first { $0["kind"] as? String == "ConfigMap" }?["data"]
                as? [String: String])
        for key in ["APPSTORE_KEY_ID", "APPSTORE_ISSUER_ID", "RENEWAL_WEBHOOK_URL"] {
            #expect(configMap[key] != nil, "the ConfigMap has no \(key) to uncomment")
        }
        for file in ["cronjob.yaml", "cronjob-parallel.yaml", "backfill-cronjob.yaml"] {
            let cronJob = try #require(try documents(file).first { $0["kind"] as? String == "CronJob" })
            let podSpec = try #require(
                ((((cronJob["spec"] as? [String: Any])?["jobTemplate"] as? [String: Any])?["spec"] as? [String: Any])?[
                    "template"] as? [String: Any])?["spec"] as? [String: Any])
            let container = try #require((podSpec["containers"] as? [[String: Any]])?.first)
            let env = container["env"] as? [[String: Any]] ?? []
            let mounts = container["volumeMounts"] as? [[String: Any]] ?? []
            let volumes = podSpec["volumes"] as? [[String: Any]] ?? []
            for (variable, key) in [
                ("APPSTORE_SHARED_SECRET_FILE", "shared-secret"), ("APPSTORE_PRIVATE_KEY_FILE", "appstore-private-key"),
                ("RENEWAL_WEBHOOK_SECRET_FILE", "webhook-secret"),
            ] {
                let value = try #require(
                    env.first { $0["name"] as? String == variable }?["value"] as? String,
                    "\(file): no \(variable) to uncomment")
                // The file is an item of a Secret volume mounted where the variable points.
                let mounted = mounts.contains { mount in
                    guard let path = mount["mountPath"] as? String, value.hasPrefix(path + "/") else { return false }
                    let item = String(value.dropFirst(path.count + 1))
                    let volume = volumes.first { $0["name"] as? String == mount["name"] as? String }
                    let items = (volume?["secret"] as? [String: Any])?["items"] as? [[String: Any]] ?? []
                    return items.contains { $0["key"] as? String == key && $0["path"] as? String == item }
                }
                #expect(mounted, "\(file): \(variable)=\(value) is not the Secret's \(key) mounted there")
            }
        }
    }
}
