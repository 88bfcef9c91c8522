/// Logging metadata keys of the job, declared once (STYLE.md B2).
enum LogKey {
    static let runID = "renewal.run_id"
    static let receiptID = "receipt.id"
    static let userID = "user.id"
    static let originalTransactionID = "subscription.original_transaction_id"
    static let reason = "renewal.failure_reason"
    static let backend = "db.backend"
}
