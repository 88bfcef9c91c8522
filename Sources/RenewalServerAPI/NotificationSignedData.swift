import Foundation
import RenewalCore

/// A verified notification's signed transaction and renewal info, as far as they can be read.
///
/// The notification's own signature covers them, so signed data inside it that cannot be decoded (not
/// a JWS, a payload that is not a transaction, no `signedDate`, a field sent as something other than
/// a string) is Apple's data the job cannot read: a failure of the run, never a notification about no
/// subscription. The subscription it names is still read where it can be (the other signed part, else
/// `originalTransactionId` in the unreadable part's payload), so it can be made due and checked.
struct NotificationSignedData {
    var transaction: JWSTransaction?
    var renewal: JWSRenewalInfo?
    /// Some of the signed data could not be decoded.
    var isUnreadable = false
    /// Of unreadable data: `originalTransactionId` as far as it can be read; nil when nothing names it.
    var originalTransactionID: String?
}

extension SignedDataVerifier {
    /// Verifies and reads a notification's signed transaction and renewal info. A part whose
    /// signature, chain, bundle or environment is wrong still throws (the notification is refused as
    /// unverified); a part that cannot be decoded marks the data unreadable.
    func signedData(of data: NotificationPayload.Data?, environment: String) async throws(SignedDataFailure)
        -> NotificationSignedData
    {
        var read = NotificationSignedData(isUnreadable: data?.signedDataUnreadable ?? false)
        var unreadableParts: [String] = []
        if let signed = data?.signedTransactionInfo {
            do {
                read.transaction = try await transaction(signed, environment: environment)
            } catch .malformed {
                unreadableParts.append(signed)
            }
        }
        if let signed = data?.signedRenewalInfo {
            do {
                read.renewal = try await renewalInfo(signed, environment: environment)
            } catch .malformed {
                unreadableParts.append(signed)
            }
        }
        guard read.isUnreadable || !unreadableParts.isEmpty else { return read }
        read.isUnreadable = true
        read.originalTransactionID =
            read.transaction?.originalTransactionId ?? read.renewal?.originalTransactionId
            ?? unreadableParts.lazy.compactMap(Self.originalTransactionID(inUndecodable:)).first
        return read
    }

    /// `originalTransactionId` from the payload of signed data that could not be decoded as a whole,
    /// when it is a JSON object naming one (as a string or a number).
    static func originalTransactionID(inUndecodable signed: String) -> String? {
        guard let parts = try? CompactJWS(signed),
            let object = try? JSONSerialization.jsonObject(with: parts.payload) as? [String: Any]
        else { return nil }
        switch object["originalTransactionId"] {
        case let text as String where !text.isEmpty: return text
        case let number as NSNumber: return number.stringValue
        default: return nil
        }
    }
}

extension KeyedDecodingContainer {
    /// `key` is present with a value other than null.
    func holdsValue(_ key: Key) -> Bool {
        contains(key) && (try? decodeNil(forKey: key)) != true
    }
}
