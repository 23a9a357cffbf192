package server

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite README.md's configuration table from the variables table")

// TestTheREADMEConfigTableIsTheVariablesTable: the README's table is made
// from the same table `seckill serve -h` prints and the start checks names
// against, so the three never disagree.
func TestTheREADMEConfigTableIsTheVariablesTable(t *testing.T) {
	const path = "../../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "| variable | meaning | default |\n")
	end := strings.Index(readme, "<!-- end of the variables table -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no configuration table between its markers")
	}
	if want := readmeTable(); readme[start:end] != want {
		if *updateREADME {
			if err := os.WriteFile(path, []byte(readme[:start]+want+readme[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatal("README.md's configuration table is not app/server/variables_table.go's: run go test ./app/server -run TestTheREADMEConfigTableIsTheVariablesTable -update-readme")
	}
}

// TestEveryVariableReadIsDeclared: whatever LoadConfig looks up, on the
// stand-ins, on real servers and for every backend, is in the table; and
// every variable of the table is read somewhere.
func TestEveryVariableReadIsDeclared(t *testing.T) {
	read := map[string]bool{}
	envs := []map[string]string{nil, realServers(nil)}
	for _, q := range BackendNames() {
		envs = append(envs, realServers(map[string]string{"SECKILL_QUEUE": q, "SECKILL_KAFKA_BROKERS": "127.0.0.1:9092"}))
	}
	envs = append(envs, realServers(map[string]string{"SECKILL_PAY_PROVIDER": "sandbox", "SECKILL_PAY_SECRET": "a-pay-secret-0123456789",
		"SECKILL_CODE_WEBHOOK_URL": "https://sms.example/", "SECKILL_CODE_WEBHOOK_SECRET": "a-webhook-secret-0123456", "SECKILL_PPROF_ADDR": "127.0.0.1:6060"}))
	for _, vars := range envs {
		if _, err := LoadConfig(func(name string) (string, bool) {
			read[name] = true
			v, ok := vars[name]
			return v, ok
		}); err != nil {
			t.Fatalf("%v: %v", vars, err)
		}
	}
	for name := range read {
		if !declared(name) {
			t.Errorf("LoadConfig reads %s, which app/server/variables_table.go does not declare", name)
		}
	}
	for _, v := range Variables() {
		if !read[v.Name] {
			t.Errorf("%s is declared but never read", v.Name)
		}
		if v.Summary == "" || strings.Contains(v.Summary, "\n") || v.Meaning == "" || v.Default == "" {
			t.Errorf("%s: a summary of one line, a meaning and a default are required", v.Name)
		}
	}
}

// TestAnUnknownVariableIsNamedWithTheNearest: a typo is named at start
// with the name it most likely meant; known names and the test suite's own
// are not.
func TestAnUnknownVariableIsNamedWithTheNearest(t *testing.T) {
	got := unknownVariables([]string{"SECKILL_QEUE=list", "SECKILL_QUEUE=list", "SECKILL_TEST_REDIS_URL=x", "PATH=/bin",
		"SECKILL_JWT_SECERT=x", "SECKILL_CODE_PER_PHONE=3", "SECKILL_REDIS=redis://x"})
	want := []string{
		"SECKILL_QEUE is not a variable the server reads (did you mean SECKILL_QUEUE?)",
		"SECKILL_JWT_SECERT is not a variable the server reads (did you mean SECKILL_JWT_SECRET?)",
		"SECKILL_CODE_PER_PHONE is not a variable the server reads (did you mean SECKILL_CODES_PER_PHONE?)",
		"SECKILL_REDIS is not a variable the server reads (did you mean SECKILL_REDIS_URL?)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestServeHelpListsEveryVariableWithItsDefault(t *testing.T) {
	var b bytes.Buffer
	PrintVariables(&b)
	for _, v := range Variables() {
		if !strings.Contains(b.String(), v.Name+" ") || !strings.Contains(b.String(), "default: "+plainText(v.Default)) {
			t.Errorf("seckill serve -h lacks %s or its default", v.Name)
		}
	}
	if strings.Contains(b.String(), "`") {
		t.Error("seckill serve -h shows markdown")
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME"} {
		if !strings.Contains(b.String(), "\n  "+name+"\n") {
			t.Errorf("seckill serve -h does not name %s, which turns traces on or shapes them", name)
		}
	}
}

// TestTheEnvironmentOfAConfigServesTheSameConfig: the environment a
// configuration writes for another process (Config.Environment, what the
// lab starts its servers with) loads back into the same configuration —
// every variable, the server's own and each backend's, defaults and what
// was derived at start (secrets the stand-ins made up, the sandbox on the
// stand-ins, dev codes forced) alike.
func TestTheEnvironmentOfAConfigServesTheSameConfig(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"stand-ins": nil,
		"real servers": realServers(map[string]string{"SECKILL_QUEUE": "kafka", "SECKILL_KAFKA_BROKERS": "127.0.0.1:9092, 127.0.0.1:9093",
			"SECKILL_DEV_CODES": "force", "SECKILL_TRUSTED_PROXIES": "10.0.0.1,192.168.0.0/16", "SECKILL_PHONE_REGIONS": "cn,hk",
			"SECKILL_CONSUMER_LINGER": "20ms", "SECKILL_PAY_PROVIDER": "sandbox", "SECKILL_PAY_SECRET": "a-pay-secret-0123456789",
			"SECKILL_LIST_RELIABLE": "true", "SECKILL_MEMORY_CAPACITY": "7", "SECKILL_NATS_URL": "nats://u:p@127.0.0.1:4222"}),
		"sync": realServers(map[string]string{"SECKILL_QUEUE": "sync", "SECKILL_PAY_PROVIDER": "", "SECKILL_ORDER_BODY": "json"}),
	} {
		first, err := LoadConfig(env(vars))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, err := LoadConfig(env(first.Environment()))
		if err != nil {
			t.Fatalf("%s: its environment does not load: %v", name, err)
		}
		if !maps.Equal(first.Environment(), again.Environment()) {
			t.Errorf("%s: the environment changed on the way:\n%v\n%v", name, first.Environment(), again.Environment())
		}
		first.lookup, again.lookup, first.given, again.given = nil, nil, nil, nil
		first.GeneratedAdminToken = false // the second start was given it
		if !reflect.DeepEqual(first, again) {
			t.Errorf("%s: the configuration changed on the way:\n%+v\n%+v", name, first, again)
		}
	}
}

// TestTheEnvTemplateHasEveryVariable: `seckill env` writes every variable
// of the table, commented out, with its default, and nothing a shell
// would read as a setting.
func TestTheEnvTemplateHasEveryVariable(t *testing.T) {
	var b bytes.Buffer
	PrintEnvTemplate(&b)
	for _, v := range Variables() {
		if !strings.Contains(b.String(), "\n#"+v.Name+"=\n") {
			t.Errorf("the env template lacks %s", v.Name)
		}
	}
	for line := range strings.Lines(b.String()) {
		if line != "\n" && !strings.HasPrefix(line, "#") {
			t.Errorf("the env template sets something: %q", line)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER"} {
		if !strings.Contains(b.String(), "\n#"+name+"=\n") {
			t.Errorf("the env template does not offer %s (traces are off without the endpoint)", name)
		}
	}
	if len(Variables()) < 50 || !declared("SECKILL_NATS_URL") || !declared("SECKILL_ADDR") {
		t.Fatalf("%d variables: the table lost the backends' or the server's", len(Variables()))
	}
}

var updateEnvTemplate = flag.Bool("update-env", false, "rewrite deploy/seckill.env from the variables table")

// TestTheDeployEnvTemplateIsTheTable: deploy/seckill.env, the template a
// deployment starts from, is what `seckill env` prints.
func TestTheDeployEnvTemplateIsTheTable(t *testing.T) {
	const path = "../../deploy/seckill.env"
	var want bytes.Buffer
	PrintEnvTemplate(&want)
	got, err := os.ReadFile(path)
	if *updateEnvTemplate {
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("deploy/seckill.env is not the variables table (%v): run go test ./app/server -run TestTheDeployEnvTemplateIsTheTable -update-env", err)
	}
}

// notYetBuilt are the contract's variables of features still to come, by
// the issue that brings them (and a name it shows as a typo).
var notYetBuilt = map[string]string{
	"SECKILL_QEUE":       "not one: the contract's example of a typo the start warns of",
	"SECKILL_WARM_AHEAD": "issue 63: warm before the opening"}

// TestEveryVariableTheContractNamesIsInTheTable: the external contract's
// SECKILL_* variables are all read (and so in the README, serve -h and the
// env template). The contract lives beside the checkout, not in it: a
// clone without it has nothing to compare.
func TestEveryVariableTheContractNamesIsInTheTable(t *testing.T) {
	contract, err := os.ReadFile("../../../shared/contract.md")
	if err != nil {
		t.Skipf("no contract beside the checkout: %v", err)
	}
	names := regexp.MustCompile(`SECKILL_[A-Z_]+[A-Z]`).FindAllString(string(contract), -1)
	if len(names) < 20 {
		t.Fatalf("found %d variables in the contract: the scan is broken", len(names))
	}
	for _, name := range names {
		if _, later := notYetBuilt[name]; !later && !declared(name) && !strings.HasPrefix(name, "SECKILL_TEST_") {
			t.Errorf("the contract names %s, which the server does not read", name)
		}
	}
	for name, why := range notYetBuilt {
		if declared(name) {
			t.Errorf("%s is read now (%s): take it off notYetBuilt", name, why)
		}
	}
}
