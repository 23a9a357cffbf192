//go:build race

package server

// raceDetector: the tests run under the race detector, which makes Go code
// several times slower; tests whose size a deadline bounds take less.
const raceDetector = true
