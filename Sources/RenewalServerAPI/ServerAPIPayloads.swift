import Foundation
import RenewalCore

/// A payload whose signature and chain the verifier checks.
protocol SignedPayload: Decodable {
    var signedDate: Date? { get }
    var environment: String? { get }
}

// The signed payloads are Core's wire models (`JWSTransaction`, `JWSRenewalInfo`), as verifyReceipt's
// are: this module verifies their JWS and decodes them; Core decides what their fields mean.
extension JWSTransaction: SignedPayload {}
extension JWSRenewalInfo: SignedPayload {}
