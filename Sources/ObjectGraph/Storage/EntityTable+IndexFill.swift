extension EntityTable {
    /// Waits for the table's index fill jobs and drops them: the table is about to change.
    func discardIndexFillJobs() {
        for job in indexes.indexFillJobs { job.wait() }
        indexes.indexFillJobs = []
    }
}
