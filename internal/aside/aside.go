// Package aside runs a deep step of a call on a short-lived goroutine of
// its own. A goroutine that then waits for a destination keeps, for as
// long as it waits, a stack as large as the deepest point it ever reached
// (docs/benchmarks.md, steps 12, 17 and 18): work that goes deeper than
// the wait, such as dialing or the CloudEvents SDK's encoding, is done
// aside so that it does not double that stack.
package aside

// Do runs f on a goroutine of its own and returns what it returned.
func Do[T any](f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}
