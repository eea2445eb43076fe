//go:build !race

package testbin

// Race reports whether this binary was built with the race detector.
const Race = false
