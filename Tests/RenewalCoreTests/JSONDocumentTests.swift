import Foundation
import PropertyBased
import Testing

@testable import RenewalCore

@Suite("JSONDocument: the answer and import-line parser")
struct JSONDocumentTests {
    static let valid: [String] = [
        #"{}"#, #"[]"#, #"0"#, #"-0"#, #"-12.5e+3"#, #"1E9"#, #"true"#, #"null"#, #""""#,
        #"{"a":[1,{"b":null}],"c":"\u00e9\ud83d\ude00\n\"\\\/"}"#, " \n\t{ \"a\" : 1 } \r\n",
    ]

    static let invalid: [String] = [
        "", " ", "{", "{\"a\"}", "{\"a\" 1}", "{a:1}", "01", "1.", ".5", "1e", "-", "+1",
        "tru", "nul", "[1 2]", "\"abc", "\"\\x\"", "\"\\u12\"", "\"a\u{01}b\"", "{} {}", "[1]]", "NaN", "'a'",
    ]

    @Test("Valid texts parse and invalid ones are refused, as JSONSerialization decides", arguments: valid + invalid)
    func agreesWithFoundation(text: String) {
        let foundation = (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil
        let ours = (try? JSONDocument(Data(text.utf8))) != nil
        #expect(ours == foundation, "\(text.debugDescription): Foundation \(foundation), JSONDocument \(ours)")
    }

    /// Foundation's parser takes a trailing comma; RFC 8259 does not, and neither does the job.
    @Test("A trailing comma is refused", arguments: ["[1,]", #"{"a":1,}"#])
    func trailingComma(text: String) {
        #expect((try? JSONDocument(Data(text.utf8))) == nil)
    }

    static func hasTrailingComma(_ text: [UInt8]) -> Bool {
        String(decoding: text, as: UTF8.self).range(of: #",\s*[\]}]"#, options: .regularExpression) != nil
    }

    @Test("Strings decode escapes and surrogate pairs; a lone surrogate or bytes that are not UTF-8 read as nil")
    func strings() throws {
        let document = try JSONDocument(Data(#"["\u00e9\ud83d\ude00\n\"\\\/x", "\ud800", "plain"]"#.utf8))
        let elements = document.root.elements
        #expect(elements.count == 3)
        #expect(elements[0].string == "é😀\n\"\\/x")
        #expect(elements[1].string == nil)
        #expect(elements[2].string == "plain")
        var bytes = Array(#"["ab"]"#.utf8)
        bytes.insert(0xFF, at: 3)
        #expect(try JSONDocument(bytes: bytes).root.elements.first?.string == nil)
    }

    @Test("Nesting past the limit is refused without recursion, at any depth")
    func deepNesting() {
        for depth in [JSONDocument.maximumDepth + 1, 100_000] {
            let text = String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
            #expect(throws: JSONSyntaxError.self) { try JSONDocument(Data(text.utf8)) }
        }
        let fits =
            String(repeating: "[", count: JSONDocument.maximumDepth)
            + String(repeating: "]", count: JSONDocument.maximumDepth)
        #expect((try? JSONDocument(Data(fits.utf8))) != nil)
    }

    @Test("A value's path names its members and indexes from the root")
    func paths() throws {
        let document = try JSONDocument(Data(#"{"a": 1, "list": [{"x": 2}, {"y": [3, {"deep": 4}]}]}"#.utf8))
        let list = try #require(try document.root.members(JSONKeys(["list"]))[0])
        #expect(list.path == "list")
        let second = list.elements[1]
        #expect(second.path == "list[1]")
        let y = try #require(try second.members(JSONKeys(["y"]))[0])
        let deep = try #require(try y.elements[1].members(JSONKeys(["deep"]))[0])
        #expect(deep.path == "list[1].y[1].deep")
        #expect(deep.integer == 4)
    }

    @Test("A used field given twice makes the answer unreadable, naming it; an unused one given twice does not")
    func duplicateKeys() throws {
        let twice =
            #"{"status": 0, "latest_receipt_info": [{"expires_date_ms": "1", "expires_date_ms": "1700000000000"}]}"#
        #expect(
            throws: AppleAnswerError.unreadableField(
                path: "latest_receipt_info[0].expires_date_ms", detail: "given twice")
        ) {
            try VerifyReceiptResponse(json: Data(twice.utf8))
        }
        let unused = #"{"status": 0, "quantity": 1, "quantity": {}}"#
        #expect(try VerifyReceiptResponse(json: Data(unused.utf8)).status == .valid)
    }

    @Test(
        """
        The verifyReceipt request body is JSON that Foundation reads back to the same request, whatever the \
        strings hold
        """
    )
    func requestBody() throws {
        for secret in ["plain", "quo\"te\\back\nline\u{01}\u{1F}é😀", ""] {
            let request = VerifyReceiptRequest(
                receiptData: "MIIT+/=\"x", password: secret, excludeOldTransactions: false)
            let decoded = try JSONDecoder().decode(VerifyReceiptRequest.self, from: Data(request.jsonBody))
            #expect(decoded == request)
        }
        let plain = VerifyReceiptRequest(receiptData: "AB/c=", password: nil)
        #expect(
            String(decoding: plain.jsonBody, as: UTF8.self)
                == #"{"receipt-data":"AB/c=","exclude-old-transactions":true}"#)
    }

    @Test("Integers read exactly up to Int64; larger ones or fractions are not integers")
    func integers() throws {
        let document = try JSONDocument(
            Data("[9223372036854775807, -9223372036854775808, 9223372036854775808, 1.5, 1e3]".utf8))
        #expect(document.root.elements.map(\.integer) == [.max, .min, nil, nil, nil])
    }

    @Test("Any mutation of a valid answer parses exactly when JSONSerialization parses it")
    func mutationsAgreeWithFoundation() async {
        let seed = Array(
            #"{"status":0,"latest_receipt_info":[{"expires_date_ms":"1700000000000","is_trial_period":"false","n":-1.5e3}],"s":"\u00e9\\"}"#
                .utf8)
        let bytes: [UInt8] = Array("{}[]\",:\\-+.eE0123456789 \ntfnu".utf8) + [0x00, 0x1F, 0x80, 0xFF]
        await propertyCheck(
            count: 400, input: Gen.int(in: 0...(seed.count - 1)), Gen.int(in: 0...(bytes.count - 1)), Gen.int(in: 0...2)
        ) {
            position, byte, operation in
            var text = seed
            switch operation {
            case 0: text[position] = bytes[byte]
            case 1: text.insert(bytes[byte], at: position)
            default: text.remove(at: position)
            }
            let foundation = (try? JSONSerialization.jsonObject(with: Data(text), options: [.fragmentsAllowed])) != nil
            // Foundation refuses text that is not UTF-8 anywhere; ours checks strings when they are read.
            let utf8 = String(validating: text, as: UTF8.self) != nil
            let ours = (try? JSONDocument(bytes: text)) != nil
            if utf8 {
                #expect(
                    ours == foundation || (foundation && Self.hasTrailingComma(text)),
                    "\(String(decoding: text, as: UTF8.self)): Foundation \(foundation), ours \(ours)")
            } else if ours == false {
                #expect(foundation == false)
            }
        }
    }
}
