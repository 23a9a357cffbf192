package server

import (
	"os"
	"testing"
)

// TestMain lets the test binary double as a helper process: a consumer to
// be killed, or the real server to be sent SIGTERM.
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "consumer":
		os.Exit(runDoomedConsumer())
	case "server":
		os.Exit(Main())
	default:
		os.Exit(3)
	}
}
