/// An array used as a FIFO: appended at the end, removed from the front by moving a head index, its
/// storage compacted now and then, so a long-lived queue neither shifts its elements on every removal
/// nor grows for ever. Every element has a position (0 for the first ever appended) that does not change
/// when those before it leave.
struct FIFOBuffer<Element> {
    private var storage: [Element] = []
    private var head = 0
    /// Position of `storage[0]`.
    private var base: UInt64 = 0

    var isEmpty: Bool { head >= storage.count }
    var count: Int { storage.count - head }
    var first: Element? { isEmpty ? nil : storage[head] }
    /// Position of the first element (of the next one appended, when empty).
    var firstPosition: UInt64 { base + UInt64(head) }

    /// Appends `element`; returns its position.
    @discardableResult
    mutating func append(_ element: Element) -> UInt64 {
        storage.append(element)
        return base + UInt64(storage.count - 1)
    }

    /// Removes and returns the first element.
    @discardableResult
    mutating func removeFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        head += 1
        if head == storage.count {
            base += UInt64(storage.count)
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= storage.count {
            base += UInt64(head)
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    /// The element `offset` places after the first (0 ..< count).
    subscript(offset offset: Int) -> Element {
        get { storage[head + offset] }
        set { storage[head + offset] = newValue }
    }

    /// The offset from the first element of the one at `position`, if it is still there.
    func offset(of position: UInt64) -> Int? {
        guard position >= firstPosition, position < base + UInt64(storage.count) else { return nil }
        return Int(position - firstPosition)
    }

    /// The elements, first to last.
    var elements: ArraySlice<Element> { storage[head...] }
}

extension FIFOBuffer: Sendable where Element: Sendable {}
