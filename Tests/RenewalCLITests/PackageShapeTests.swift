import Foundation
import Testing

/// Package.swift as SwiftPM reads it (`swift package dump-package`) against the imports of every
/// target's files: each module a target imports is one it declares (a target or product it names, or
/// a system module), and no file imports its own target. An undeclared import builds today only
/// because another target happened to build the module first; a build of that one target alone, or a
/// dependency dropped elsewhere, breaks it.
@Suite("Package shape: every import is a declared dependency, and no target imports itself")
struct PackageShapeTests {
    /// Modules that come with the toolchain or the operating system, never declared in Package.swift.
    static let systemModules: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "FoundationXML", "Glibc", "Musl",
        "Darwin", "Dispatch", "Synchronization", "Testing", "XCTest", "Observation", "RegexBuilder",
        "_Concurrency", "Swift",
    ]

    /// One target of the package: its name, folder and the modules it declares.
    struct Target {
        var name: String
        var path: String
        var declared: Set<String>
    }

    /// The targets SwiftPM reads from Package.swift, system library targets left out (they import nothing).
    static func targets() throws -> [Target] {
        let json = try dumpPackage()
        guard let object = try JSONSerialization.jsonObject(with: json) as? [String: Any],
            let list = object["targets"] as? [[String: Any]]
        else { throw ShapeError("dump-package printed no targets") }
        return list.compactMap { entry -> Target? in
            guard let name = entry["name"] as? String, let type = entry["type"] as? String, type != "system"
            else { return nil }
            let folder = type == "test" ? "Tests" : "Sources"
            let path = (entry["path"] as? String) ?? "\(folder)/\(name)"
            let dependencies = (entry["dependencies"] as? [[String: Any]]) ?? []
            let declared = dependencies.compactMap { dependency -> String? in
                for kind in ["byName", "target", "product"] {
                    if let fields = dependency[kind] as? [Any], let first = fields.first as? String { return first }
                }
                return nil
            }
            return Target(name: name, path: path, declared: Set(declared))
        }
    }

    /// `swift package dump-package` with its own scratch folder, so it never waits on the build's lock
    /// (held by the `swift test` running this).
    static func dumpPackage() throws -> Data {
        let scratch = NSTemporaryDirectory() + "renewal-dump-package-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "swift", "package", "--package-path", DeployFiles.root, "--scratch-path", scratch, "dump-package",
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ShapeError("swift package dump-package exited \(process.terminationStatus)")
        }
        return data
    }

    /// The modules a file imports, with the line of each: `import X`, `@testable import X`,
    /// `internal import X`, `import struct X.Y` and the like, outside strings and comments.
    static func imports(in source: SwiftSourceText) -> [(line: Int, module: String)] {
        let pattern = try! Regex(
            #"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?([A-Za-z_][A-Za-z0-9_]*)"#
        )
        return source.codeLines.enumerated().compactMap { index, line in
            guard let match = line.firstMatch(of: pattern), let module = match.output[1].substring else { return nil }
            return (index + 1, String(module))
        }
    }

    /// What a target's files import that it may not: its own module, or one it does not declare.
    static func offences(of target: Target) throws -> [String] {
        let folder = DeployFiles.root + "/" + target.path
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        var offences: [String] = []
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let source = try SwiftSourceText(contentsOfFile: folder + "/" + relative)
            for (line, module) in imports(in: source) {
                let place = "\(target.path)/\(relative):\(line)"
                if module == target.name {
                    offences.append("\(place) imports its own target \(module)")
                } else if !target.declared.contains(module) && !systemModules.contains(module) {
                    offences.append("\(place) imports \(module), which target \(target.name) does not declare")
                }
            }
        }
        return offences.sorted()
    }

    @Test("every import of every target's files is a declared dependency or a system module")
    func everyImportIsDeclared() throws {
        let targets = try Self.targets()
        #expect(targets.contains { $0.name == "renewal-bench" && $0.path == "Benchmarks/renewal-bench" })
        #expect(targets.count > 20)
        let offences = try targets.flatMap(Self.offences(of:))
        #expect(offences.isEmpty, "\(offences.joined(separator: "\n"))")
    }

    @Test("imports are read outside strings and comments, with attributes, access and kinds")
    func importsAreReadAsCode() {
        let source = SwiftSourceText(
            """
            @testable import Alpha
            internal import Beta
            import struct Gamma.Thing
            // import Delta
            let script = \"""
                import json, sys
                \"""
            /* import Epsilon */
            @preconcurrency public import Zeta
            """)
        #expect(Self.imports(in: source).map(\.module) == ["Alpha", "Beta", "Gamma", "Zeta"])
    }

    struct ShapeError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
