// The persistent paged arrays behind store snapshots: a two-level tree of fixed-size pages that
// a writer changes by copying only the pages (and the one directory node) a change touches.

/// A page of a ``PageTree``: a fixed-size block of storage that can copy itself.
///
/// Pages are classes because a snapshot shares them: a published snapshot and the writer's next
/// version point at the same page until the writer changes it, and then the writer changes a
/// copy (``PageTree/mutablePage(_:generation:make:)``).
protocol TreePage: AnyObject {
    /// The publish generation the page was created in: the writer changes a page in place only
    /// while its generation is the writer's current one (the page is not yet visible to any
    /// reader).
    var generation: UInt64 { get }
    /// A copy of the page, owned by `generation`.
    func copy(generation: UInt64) -> Self
}

/// The middle level of a ``PageTree``: up to ``PageTree/fanout`` pages.
///
/// `@unchecked Sendable`: a node is changed only by the writer, and only while its
/// `generation` is the writer's current one, that is before the snapshot that first contains it
/// is published. Publication goes through a `Mutex` (``SnapshotHub``), whose release and
/// acquire order every write to the node before any reader's first read of it; after that the
/// node is never written again.
final class TreeNode<Page: TreePage>: @unchecked Sendable {
    let generation: UInt64
    @exclusivity(unchecked) var pages: [Page?]

    init(generation: UInt64, pages: [Page?]) {
        self.generation = generation
        self.pages = pages
    }
}

/// A persistent array of pages, addressed by page number: a root array of nodes, each holding
/// ``fanout`` pages.
///
/// A value: copying a tree (publishing a snapshot) copies the root array's references, one per
/// ``fanout`` pages. Changing a page in a later generation copies that page and its node once
/// per generation (``mutablePage(_:generation:make:)``); everything else stays shared with the
/// published versions. The cost of a publish is therefore the pages it changed, plus one copy
/// of the root: one reference per ``fanout`` pages (62 for a million rows of 64-row pages).
struct PageTree<Page: TreePage>: @unchecked Sendable {
    // `@unchecked Sendable`: the tree holds only `TreeNode`s (see there) and pages, which follow
    // the same rule: written only in the generation that created them, before publication.

    /// Pages per node.
    static var fanout: Int { 256 }
    static var fanoutShift: Int { 8 }

    private(set) var root: [TreeNode<Page>?] = []

    init() {}

    /// The page numbered `p`, if it exists.
    @inline(__always)
    func page(_ p: Int) -> Page? {
        let n = p >> Self.fanoutShift
        guard n < root.count, let node = root[n] else { return nil }
        return node.pages[p & (Self.fanout - 1)]
    }

    /// The number of page positions the root covers.
    var pageCapacity: Int { root.count << Self.fanoutShift }

    /// The page numbered `p`, writable in `generation`: copied (with its node) if an earlier
    /// generation made it, created by `make` if it does not exist.
    mutating func mutablePage(_ p: Int, generation: UInt64, make: () -> Page) -> Page {
        let n = p >> Self.fanoutShift
        if n >= root.count { root.append(contentsOf: repeatElement(nil, count: n + 1 - root.count)) }
        let node: TreeNode<Page>
        if let existing = root[n], existing.generation == generation {
            node = existing
        } else {
            node = TreeNode(generation: generation, pages: root[n]?.pages ?? Array(repeating: nil, count: Self.fanout))
            root[n] = node
        }
        let i = p & (Self.fanout - 1)
        if let page = node.pages[i] {
            if page.generation == generation { return page }
            let copy = page.copy(generation: generation)
            node.pages[i] = copy
            return copy
        }
        let page = make()
        node.pages[i] = page
        return page
    }

    /// Removes page `p` (every row on it is gone).
    mutating func removePage(_ p: Int, generation: UInt64) {
        let n = p >> Self.fanoutShift
        guard n < root.count, let existing = root[n], existing.pages[p & (Self.fanout - 1)] != nil else { return }
        let node =
            existing.generation == generation ? existing : TreeNode(generation: generation, pages: existing.pages)
        node.pages[p & (Self.fanout - 1)] = nil
        root[n] = node.pages.contains { $0 != nil } ? node : nil
    }
}
