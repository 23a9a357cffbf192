package deploy_test

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// composeParts are the optional files, alone and together.
var composeParts = [][]string{nil, {"nats"}, {"grafana"}, {"tracing"}, {"nats", "grafana", "tracing"}}

// composeTool is the named tool, or a skip (CI installs both: a missing
// one fails there).
func composeTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("%s is not installed; .ci/run installs it (Debian's package)", name)
		}
		t.Skipf("no %s on this machine", name)
	}
	return path
}

// deployCopy is deploy/ copied into a folder of the test's own, with an
// .env of the test's secrets, named so that podman-compose's project (the
// folder's name) is the test's own.
func deployCopy(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "seckilltest"+strings.ToLower(testenv.RandomSuffix()))
	if err := os.CopyFS(dir, os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	var env strings.Builder
	for _, k := range slices.Sorted(maps.Keys(composeSecrets)) {
		env.WriteString(k + "=" + composeSecrets[k] + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte(env.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func composeArgs(parts []string) []string {
	args := []string{"-f", "compose.yaml"}
	for _, p := range parts {
		args = append(args, "-f", "compose."+p+".yaml")
	}
	return args
}

// wantServices are the services compose-go loads for parts.
func wantServices(t *testing.T, parts []string) []string {
	t.Helper()
	p, err := loadCompose(t, composeSecrets, parts...)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(p.Services))
}

// TestTheComposeFileParsesWithDebiansTools: a Debian 12 user has
// docker-compose 1.29 and podman-compose 1.0.3 (the new user's run: the
// file crashed the one and was refused by the other). Each reads the file
// with each optional file, finding the services compose-go finds, no
// more (podman-compose 1.0.3 ignores profiles: the optional services are
// files) and nothing left unexpanded. podman-compose has no `config`: its
// --dry-run up parses the file, and creates the project's network and
// volumes, which the test removes.
func TestTheComposeFileParsesWithDebiansTools(t *testing.T) {
	t.Run("docker-compose", func(t *testing.T) {
		tool := composeTool(t, "docker-compose")
		dir := deployCopy(t)
		for _, parts := range composeParts {
			cmd := exec.Command(tool, append(composeArgs(parts), "config", "--services")...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("docker-compose %v config: %v\n%s", parts, err, out)
			}
			got := slices.Sorted(slices.Values(strings.Fields(string(out))))
			if want := wantServices(t, parts); !slices.Equal(got, want) {
				t.Errorf("docker-compose with %v: services %v, want %v", parts, got, want)
			}
			cmd = exec.Command(tool, append(composeArgs(parts), "config")...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "${") {
				t.Errorf("docker-compose %v config: %v, or something left unexpanded:\n%s", parts, err, out)
			}
		}
	})
	t.Run("podman-compose", func(t *testing.T) {
		tool := composeTool(t, "podman-compose")
		podman := containerTool(t)
		dir := deployCopy(t)
		project := filepath.Base(dir)
		t.Cleanup(func() { removeProject(podman, project) })
		run := regexp.MustCompile(`(?m)^podman run --name=` + project + `_(\S+)_1 `)
		for _, parts := range composeParts {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := exec.CommandContext(ctx, tool, append(composeArgs(parts), "--dry-run", "up", "-d")...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("podman-compose %v --dry-run up: %v\n%s", parts, err, out)
			}
			var got []string
			for _, m := range run.FindAllStringSubmatch(string(out), -1) {
				got = append(got, m[1])
			}
			slices.Sort(got)
			if want := wantServices(t, parts); !slices.Equal(got, want) {
				t.Errorf("podman-compose with %v would start %v, want %v", parts, got, want)
			}
			if strings.Contains(string(out), "${") {
				t.Errorf("podman-compose %v left something unexpanded:\n%s", parts, out)
			}
		}
	})
}

// removeProject removes what podman-compose's dry run created: the
// project's volumes and network.
func removeProject(podman, project string) {
	out, _ := exec.Command(podman, "volume", "ls", "-q", "--filter", "name=^"+project+"_").Output()
	for _, v := range strings.Fields(string(out)) {
		exec.Command(podman, "volume", "rm", "-f", v).Run()
	}
	exec.Command(podman, "network", "rm", "-f", project+"_default").Run()
}
