/// One value of a `JSONDocument`: its kind, and its contents read on demand.
package struct JSONValue: Sendable {
    let document: JSONDocument
    let index: Int32

    private var node: JSONDocument.Node { document.nodes[Int(index)] }

    package var kind: JSONDocument.Kind { node.kind }

    /// The contents of a string, checked to be UTF-8 (escapes decoded); nil for any other kind or
    /// for bytes that are not UTF-8.
    package var string: String? {
        let node = self.node
        guard node.kind == .string else { return nil }
        return document.bytes.withUnsafeBufferPointer { buffer in
            let text = UnsafeBufferPointer(rebasing: buffer[Int(node.start)..<Int(node.end)])
            guard node.escaped else { return String(validating: text, as: UTF8.self) }
            return JSONText.unescape(text).flatMap { String(validating: $0, as: UTF8.self) }
        }
    }

    /// The text of a number, as written.
    package var numberText: String? {
        let node = self.node
        guard node.kind == .number else { return nil }
        return String(decoding: document.bytes[Int(node.start)..<Int(node.end)], as: UTF8.self)
    }

    /// A number written as a plain integer that fits an `Int64`.
    package var integer: Int64? {
        let node = self.node
        guard node.kind == .number else { return nil }
        var value: Int64 = 0
        var index = Int(node.start)
        let negative = document.bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        while index < Int(node.end) {
            let digit = document.bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(negative ? -Int64(digit) : Int64(digit))
            guard !overflow, !carry else { return nil }
            value = sum
            index += 1
        }
        return value
    }

    /// The elements of an array (empty for any other kind).
    package var elements: [JSONValue] {
        let node = self.node
        guard node.kind == .array else { return [] }
        var result: [JSONValue] = []
        result.reserveCapacity(Int(node.count))
        var child = index + 1
        for _ in 0..<node.count {
            result.append(JSONValue(document: document, index: child))
            child = document.nodes[Int(child)].next
        }
        return result
    }

    /// The values of `keys`' names in this object, found in one pass over its members.
    ///
    /// - Throws: `JSONMemberError.duplicate` when one of those names is given twice (which value
    ///   a sender meant cannot be known) unless `lastWins`; other members are not looked at.
    package func members(_ keys: JSONKeys, lastWins: Bool = false) throws(JSONMemberError) -> JSONMembers {
        var slots = [Int32](repeating: -1, count: keys.names.count)
        let node = self.node
        guard node.kind == .object else { return JSONMembers(document: document, slots: slots) }
        var key = index + 1
        for _ in 0..<node.count {
            let value = key + 1
            if let slot = keys.slot(of: key, in: document) {
                guard slots[slot] < 0 || lastWins else { throw JSONMemberError.duplicate(keys.names[slot]) }
                slots[slot] = value
            }
            key = document.nodes[Int(value)].next
        }
        return JSONMembers(document: document, slots: slots)
    }

    /// Where this value is, from the root: `latest_receipt_info[0].expires_date_ms`.
    package var path: String {
        var components = ""
        var current: Int32 = 0
        while current != index {
            let node = document.nodes[Int(current)]
            var child = current + 1
            var inside: Int32?
            for position in 0..<node.count {
                if node.kind == .object {
                    let value = child + 1
                    let next = document.nodes[Int(value)].next
                    if child <= index && index < next {
                        let name = JSONValue(document: document, index: child).string ?? "?"
                        components += components.isEmpty ? name : "." + name
                        inside = index == child ? nil : value
                        if index == child { return components }
                        break
                    }
                    child = next
                } else {
                    let next = document.nodes[Int(child)].next
                    if child <= index && index < next {
                        components += "[\(position)]"
                        inside = child
                        break
                    }
                    child = next
                }
            }
            guard let inside else { break }
            current = inside
        }
        return components
    }
}

/// Member names to look up in objects, prepared once (their UTF-8 and lengths).
package final class JSONKeys: Sendable {
    package let names: [String]
    private let utf8: [[UInt8]]

    package init(_ names: [String]) {
        self.names = names
        self.utf8 = names.map { Array($0.utf8) }
    }

    /// The position of the member name held by the string node `key`, or nil.
    fileprivate func slot(of key: Int32, in document: JSONDocument) -> Int? {
        let node = document.nodes[Int(key)]
        if node.escaped {
            guard let name = JSONValue(document: document, index: key).string else { return nil }
            return names.firstIndex(of: name)
        }
        let start = Int(node.start)
        let length = Int(node.end) - start
        return document.bytes.withUnsafeBufferPointer { bytes in
            search: for (slot, name) in utf8.enumerated() where name.count == length {
                for offset in 0..<length where name[offset] != bytes[start + offset] { continue search }
                return slot
            }
            return nil
        }
    }
}

/// The members of one object found for a `JSONKeys`, by position.
package struct JSONMembers: Sendable {
    let document: JSONDocument
    let slots: [Int32]

    /// The value of the key at `position`, or nil when absent or `null`.
    package subscript(_ position: Int) -> JSONValue? {
        let index = slots[position]
        guard index >= 0 else { return nil }
        let value = JSONValue(document: document, index: index)
        return value.kind == .null ? nil : value
    }

    /// The value of the key at `position`, an explicit `null` included; nil only when absent.
    package func given(_ position: Int) -> JSONValue? {
        let index = slots[position]
        return index >= 0 ? JSONValue(document: document, index: index) : nil
    }
}

package enum JSONMemberError: Error, Sendable, Hashable {
    case duplicate(String)
}
