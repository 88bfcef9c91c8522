/// Logging metadata keys the executable writes, each declared here once.
enum LogKey {
    static let apps = "appstore.apps"
    static let appstoreClient = "appstore.client"
    static let appstoreServerAPI = "appstore.server_api"
    static let appstoreSource = "appstore.source"
    static let attempt = "renewal.attempt"
    static let bucket = "renewal.bucket"
    static let dbApplied = "db.applied"
    static let dbBackend = "db.backend"
    static let dbFrom = "db.from"
    static let dbTo = "db.to"
}
