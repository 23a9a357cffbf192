package lab

import (
	"os"
	"testing"

	"github.com/seckill-lab/seckill/app/server"
)

// childEnv makes the test binary a server process: the lab starts its
// instances as this same binary (os.Executable), which under go test is
// the test binary.
const childEnv = "SECKILL_LAB_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "server" {
		os.Exit(server.Main())
	}
	os.Exit(m.Run())
}
