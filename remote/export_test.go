package remote

// Routes counts the calls n still routes a result for: calls that went to
// a tool and whose result has not gone back to the caller.
func Routes(n *Node) int {
	count := 0
	n.routes.Range(func(any, any) bool { count++; return true })
	return count
}
