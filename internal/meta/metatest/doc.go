// Package metatest is the conformance suite every meta.Engine must pass:
// engine-level checks of the transactional key-value contract, and the
// Store's POSIX namespace and stripe-commit checks run over that engine,
// including the data-driven scenarios in testdata/*.txt.
//
// An engine's test is one line:
//
//	func TestConformance(t *testing.T) { metatest.Run(t, openEngine) }
//
// open must return a fresh, empty engine and register its Close with
// t.Cleanup. Scenario files are regenerated with
// go test ./internal/meta/sqlite -run Conformance/scenario -rewrite.
package metatest
