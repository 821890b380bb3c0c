extension EntityTable {
    /// Waits for the table's index fill jobs and drops them: the table is about to change.
    func discardIndexFillJobs() {
        for job in indexFillJobs { job.wait() }
        indexFillJobs = []
    }
}
