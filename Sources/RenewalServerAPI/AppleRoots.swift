import Foundation
import SwiftASN1
import X509

/// The roots signed App Store data is trusted to: Apple Root CA - G3, shipped in the binary so a
/// static build needs no files. `APPSTORE_ROOT_CERTIFICATES` replaces them (simulators, tests).
public enum AppleRoots {
    /// Apple Root CA - G3 (DER, base64), as published at https://www.apple.com/certificateauthority/
    /// (SHA-256 fingerprint
    /// 63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79).
    static let appleRootCAG3 = [
        "MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9vdCBDQSAtIEczMSYwJAYD",
        "VQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcN",
        "MTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBSb290IENBIC0gRzMxJjAkBgNVBAsMHUFw",
        "cGxlIENlcnRpZmljYXRpb24gQXV0aG9yaXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49",
        "AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtfTjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA",
        "/VhYDKX1DyxNB0cTddqXl5dvMVztK517IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySr",
        "MA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gAMGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZL",
        "uN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM",
        "6BgD56KyKA==",
    ].joined()

    /// The shipped roots. Decoding a constant cannot fail at run time once the tests pass; an empty
    /// list would make every signed answer fail closed (`jws_untrusted_chain`), never pass.
    public static let certificates: [Certificate] = {
        guard let der = Data(base64Encoded: appleRootCAG3), let root = try? Certificate(derEncoded: Array(der)) else {
            return []
        }
        return [root]
    }()
}
