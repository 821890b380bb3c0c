/// The outer bound of every wait for an event in the tests (a server that accepts connections,
/// a follower that applied or refused a record, a child process that exited, a message that
/// arrived): a test waits for the event itself, and this bound only ends a test that would
/// otherwise hang. It is generous on purpose: CI runs on a shared 2-core machine whose load
/// average can be 10 or more, where an event that takes 0.4 s alone can take many seconds.
public let eventBound: Duration = .seconds(300)

/// The bound of an assertion that something happens "at once" rather than after a retry loop
/// or a timeout (a refused connection reported, a publish that fails within its timeout): far
/// above what a loaded machine takes for the event, far below what the slow path would take.
public let atOnceBound: Duration = .seconds(60)
