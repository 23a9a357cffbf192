package deploy_test

import (
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/yaml"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/app/server"
)

// composeSecrets are what deploy/.env holds in a deployment (compose.env.example).
var composeSecrets = map[string]string{
	"MYSQL_PASSWORD":         "compose-test-mysql-0123456789",
	"MYSQL_ROOT_PASSWORD":    "compose-test-root-0123456789",
	"SECKILL_JWT_SECRET":     testenv.Secret(),
	"SECKILL_ADMIN_TOKEN":    testenv.Secret(),
	"REDIS_PASSWORD":         "composetestredis0123456789",
	"NATS_PASSWORD":          "composetestnats0123456789",
	"GRAFANA_ADMIN_PASSWORD": "composetestgrafana0123456789",
}

// loadCompose loads compose.yaml as `docker compose` would, with env as the
// shell's environment (deploy/.env, where a deployment keeps its secrets,
// is not read) and the optional parts given (compose.<part>.yaml: nats,
// grafana, tracing): validated against the compose specification's schema,
// interpolated, the anchors merged.
func loadCompose(t *testing.T, env map[string]string, parts ...string) (*types.Project, error) {
	t.Helper()
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	files := []string{"compose.yaml"}
	for _, p := range parts {
		files = append(files, "compose."+p+".yaml")
	}
	opts, err := cli.NewProjectOptions(files, cli.WithWorkingDirectory("."), cli.WithEnv(list),
		cli.WithDiscardEnvFile, cli.WithInterpolation(true), cli.WithName("seckill"))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// instances are the project's services that run the server's image.
func instances(p *types.Project) []types.ServiceConfig {
	var out []types.ServiceConfig
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		if s := p.Services[name]; slices.Equal(s.Command, []string{"serve"}) {
			out = append(out, s)
		}
	}
	return out
}

// TestTheComposeFileDeploysTheServerAsTheDocsSay: compose.yaml loads under
// the compose specification (schema, interpolation, the optional files); it refuses to
// load without the secrets; it runs Redis with AOF, two replicas and three
// sentinels, MariaDB, two instances and Prometheus, each with a
// healthcheck; each instance's environment is one the server starts with,
// through the sentinels, waiting for a replica; Prometheus scrapes each
// instance's metrics listener with the alert rules; compose.nats.yaml moves
// the instances to NATS.
func TestTheComposeFileDeploysTheServerAsTheDocsSay(t *testing.T) {
	checkSecretsTemplate(t)
	p, err := loadCompose(t, composeSecrets)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mariadb", "prometheus", "redis", "redis-replica-1", "redis-replica-2",
		"seckill-1", "seckill-2", "sentinel-1", "sentinel-2", "sentinel-3"}
	if got := slices.Sorted(maps.Keys(p.Services)); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	for name, s := range p.Services {
		if h := s.HealthCheck; h == nil || h.Disable || len(h.Test) < 2 || h.Test[0] != "CMD" {
			t.Errorf("%s: healthcheck %+v, want a command", name, h)
		}
	}
	checkRedis(t, p)
	insts := instances(p)
	if len(insts) != 2 {
		t.Fatalf("%d instances of the server, want 2", len(insts))
	}
	names := map[string]bool{}
	for _, s := range insts {
		c := checkInstance(t, p, s)
		names[c.ConsumerName] = true
		if c.Queue != "streamgroup" || c.WaitReplicas < 1 {
			t.Errorf("%s: queue %s, waiting for %d replicas; want the default streamgroup, waiting for one", s.Name, c.Queue, c.WaitReplicas)
		}
	}
	if len(names) != len(insts) {
		t.Errorf("consumer names %v: want one each", names)
	}
	checkPrometheus(t, p, insts)

	p, err = loadCompose(t, composeSecrets, "nats", "grafana")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Services["nats"]; !ok {
		t.Fatal("compose.nats.yaml adds no nats service")
	}
	for _, s := range instances(p) {
		if c := checkInstance(t, p, s); c.Queue != "nats" || !strings.Contains(c.Value("SECKILL_NATS_URL"), "//seckill:"+composeSecrets["NATS_PASSWORD"]+"@nats:") {
			t.Errorf("%s with compose.nats.yaml: queue %s at %s", s.Name, c.Queue, c.Value("SECKILL_NATS_URL"))
		}
		if d, ok := s.DependsOn["nats"]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s with compose.nats.yaml: depends on nats %+v, want it healthy first", s.Name, d)
		}
	}
	checkGrafana(t, p)
	checkTracing(t)
}

// checkTracing: without compose.tracing.yaml the instances trace nothing
// (no endpoint at all: an empty default reached the server unexpanded
// under podman-compose 1.0.3); with it, Jaeger runs and the instances
// export to its OTLP http port at the 1 % the guide says.
func checkTracing(t *testing.T) {
	t.Helper()
	p, err := loadCompose(t, composeSecrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range instances(p) {
		if e, set := s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; set {
			t.Errorf("%s sets an OTLP endpoint by default: %v", s.Name, e)
		}
	}
	if p, err = loadCompose(t, composeSecrets, "tracing"); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Services["jaeger"]; !ok {
		t.Fatal("compose.tracing.yaml adds no jaeger service")
	}
	for _, s := range instances(p) {
		env := s.Environment
		if e := env["OTEL_EXPORTER_OTLP_ENDPOINT"]; e == nil || *e != "http://jaeger:4318" ||
			*env["OTEL_TRACES_SAMPLER"] != "parentbased_traceidratio" || *env["OTEL_TRACES_SAMPLER_ARG"] != "0.01" {
			t.Errorf("%s with compose.tracing.yaml: %v", s.Name, env)
		}
	}
}

// checkSecretsTemplate: compose.env.example names exactly the variables
// the compose files require, and compose.yaml refuses to load without them.
func checkSecretsTemplate(t *testing.T) {
	t.Helper()
	files, _ := filepath.Glob("compose*.yaml")
	required := map[string]bool{}
	for _, f := range files {
		compose, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\$\{([A-Z_]+):\?`).FindAllStringSubmatch(string(compose), -1) {
			required[m[1]] = true
		}
	}
	example, err := os.ReadFile("compose.env.example")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)=$`).FindAllStringSubmatch(string(example), -1) {
		listed[m[1]] = true
	}
	given := map[string]bool{}
	for name := range composeSecrets {
		given[name] = true
	}
	if !maps.Equal(required, listed) || !maps.Equal(required, given) {
		t.Errorf("compose.yaml requires %v; compose.env.example lists %v, the test gives %v", slices.Sorted(maps.Keys(required)),
			slices.Sorted(maps.Keys(listed)), slices.Sorted(maps.Keys(composeSecrets)))
	}
	if _, err := loadCompose(t, nil); err == nil || !strings.Contains(err.Error(), "MYSQL_PASSWORD") {
		t.Errorf("loaded without the secrets: %v; want an error naming MYSQL_PASSWORD", err)
	}
}

// checkInstance: s runs the image's health command, waits for its
// database and sentinels, is given a stop past the server's 9 s drain,
// and its environment (the variables it sets all the server's) starts the
// server against the sentinels the project runs. It returns that Config.
func checkInstance(t *testing.T, p *types.Project, s types.ServiceConfig) server.Config {
	t.Helper()
	declared := map[string]bool{}
	for _, v := range server.Variables() {
		declared[v.Name] = true
	}
	for _, name := range server.OTELVariables {
		declared[name] = true
	}
	for name := range s.Environment {
		if !declared[name] {
			t.Errorf("%s sets %s, which the server does not read", s.Name, name)
		}
	}
	c, err := server.LoadConfig(func(name string) (string, bool) {
		v, ok := s.Environment[name]
		if !ok || v == nil {
			return "", false
		}
		return *v, true
	})
	if err != nil {
		t.Fatalf("%s: the server would not start: %v", s.Name, err)
	}
	if !slices.Equal(s.HealthCheck.Test, []string{"CMD", "/seckill", "health"}) {
		t.Errorf("%s: healthcheck %v, want the image's own /seckill health", s.Name, s.HealthCheck.Test)
	}
	if g := s.StopGracePeriod; g == nil || time.Duration(*g) < 15*time.Second {
		t.Errorf("%s: stop_grace_period %v, want room for the 9 s drain", s.Name, g)
	}
	if !s.ReadOnly {
		t.Errorf("%s: want a read-only root filesystem, as on Kubernetes", s.Name)
	}
	for _, dep := range []string{"mariadb", "sentinel-1", "sentinel-2", "sentinel-3"} {
		if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: depends on %s %+v; want it healthy first", s.Name, dep, d)
		}
	}
	failover, err := redis.ParseFailoverURL(c.RedisURL)
	if err != nil {
		t.Fatalf("%s: SECKILL_REDIS_URL %q: %v", s.Name, c.RedisURL, err)
	}
	var sentinels []string
	for _, a := range failover.SentinelAddrs {
		host, port, _ := net.SplitHostPort(a)
		sentinels = append(sentinels, host)
		if _, ok := p.Services[host]; !ok || port != "26379" || !strings.HasPrefix(host, "sentinel-") {
			t.Errorf("%s: sentinel %s is not a sentinel service of the project", s.Name, a)
		}
	}
	if len(sentinels) != 3 || failover.MasterName != monitoredName(t, p) {
		t.Errorf("%s: sentinels %v for %q; want the three, for the name they monitor (%q)", s.Name, sentinels,
			failover.MasterName, monitoredName(t, p))
	}
	return c
}

// monitoredName is the master name in the sentinels' configuration.
func monitoredName(t *testing.T, p *types.Project) string {
	t.Helper()
	for _, line := range strings.Split(sentinelConf(t, p, "sentinel-1"), "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "sentinel" && f[1] == "monitor" {
			if f[3] != "redis" || f[5] != "2" {
				t.Errorf("sentinels monitor %s with quorum %s; want the redis service, 2 of 3", f[3], f[5])
			}
			return f[2]
		}
	}
	t.Fatal("the sentinel configuration monitors nothing")
	return ""
}

// checkRedis: every data node keeps an append-only file and refuses to
// evict; each replica follows the primary; each sentinel runs the shared
// configuration.
func checkRedis(t *testing.T, p *types.Project) {
	t.Helper()
	for _, name := range []string{"redis", "redis-replica-1", "redis-replica-2"} {
		cmd := strings.Join(p.Services[name].Command, " ")
		for _, flag := range []string{"--appendonly yes", "--maxmemory-policy noeviction", "--replica-announce-ip " + name} {
			if !strings.Contains(cmd, flag) {
				t.Errorf("%s: %q lacks %s", name, cmd, flag)
			}
		}
		if replica := name != "redis"; replica != strings.Contains(cmd, "--replicaof redis 6379") {
			t.Errorf("%s: %q: want only the replicas to follow redis", name, cmd)
		}
	}
	for _, name := range []string{"sentinel-1", "sentinel-2", "sentinel-3"} {
		sentinelConf(t, p, name)
	}
}

// sentinelScript is where a sentinel service mounts redis/sentinel.sh.
const sentinelScript = "/usr/local/bin/seckill-sentinel.sh"

// sentinelConf is the configuration the sentinel service name writes and
// runs (redis/sentinel.sh's, with the password of its environment), after
// checking that it runs the script, mounted read-only from deploy/redis.
func sentinelConf(t *testing.T, p *types.Project, name string) string {
	t.Helper()
	s := p.Services[name]
	here, _ := filepath.Abs("redis/sentinel.sh")
	if !slices.Equal(s.Command, []string{"sh", sentinelScript}) || !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Source == here && v.Target == sentinelScript && v.ReadOnly
	}) {
		t.Fatalf("%s: runs %v with %+v; want redis/sentinel.sh, mounted read-only", name, s.Command, s.Volumes)
	}
	script, err := os.ReadFile("redis/sentinel.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(script), "cat > /data/sentinel.conf <<EOF\n")
	conf, rest, found := strings.Cut(body, "EOF\n")
	if !found || !strings.Contains(rest, "exec redis-server /data/sentinel.conf --sentinel") {
		t.Fatalf("redis/sentinel.sh does not write /data/sentinel.conf and run it:\n%s", script)
	}
	pw := s.Environment["REDIS_PASSWORD"]
	if pw == nil || *pw == "" {
		t.Fatalf("%s: no REDIS_PASSWORD in its environment for the script", name)
	}
	return strings.ReplaceAll(conf, "${REDIS_PASSWORD}", *pw)
}

// checkPrometheus: Prometheus reads deploy/prometheus (the rules and its
// configuration), and its configuration scrapes every instance's metrics
// listener and loads the alert rules.
func checkPrometheus(t *testing.T, p *types.Project, insts []types.ServiceConfig) {
	t.Helper()
	here, _ := filepath.Abs("prometheus")
	prom := p.Services["prometheus"]
	if !slices.ContainsFunc(prom.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Source == here && v.Target == "/etc/prometheus" && v.ReadOnly
	}) || !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus: volumes %+v, command %v; want deploy/prometheus at /etc/prometheus, its prometheus.yml", prom.Volumes, prom.Command)
	}
	var config struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	raw, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &config); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, sc := range config.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	for _, s := range insts {
		_, port, _ := net.SplitHostPort(*s.Environment["SECKILL_METRICS_ADDR"])
		if want := s.Name + ":" + port; !slices.Contains(targets, want) {
			t.Errorf("prometheus scrapes %v; want %s, %s's metrics listener", targets, want, s.Name)
		}
	}
	if !slices.Contains(config.RuleFiles, "alerts.yml") {
		t.Errorf("prometheus loads the rules %v; want alerts.yml", config.RuleFiles)
	}
}

// checkGrafana: compose.grafana.yaml's Grafana is provisioned from
// deploy/grafana: the project's Prometheus as its datasource, the boards'
// folder as the provider's path.
func checkGrafana(t *testing.T, p *types.Project) {
	t.Helper()
	g, ok := p.Services["grafana"]
	if !ok {
		t.Fatal("compose.grafana.yaml adds no grafana service")
	}
	mounts := map[string]string{}
	for _, v := range g.Volumes {
		mounts[v.Target] = v.Source
	}
	var datasources struct {
		Datasources []struct{ URL, Type string } `json:"datasources"`
	}
	var providers struct {
		Providers []struct {
			Options struct{ Path string } `json:"options"`
		} `json:"providers"`
	}
	readYAML(t, filepath.Join(mounts["/etc/grafana/provisioning"], "datasources/prometheus.yaml"), &datasources)
	readYAML(t, filepath.Join(mounts["/etc/grafana/provisioning"], "dashboards/seckill.yaml"), &providers)
	if len(datasources.Datasources) != 1 || datasources.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana's datasources %+v; want the project's prometheus", datasources)
	}
	if len(providers.Providers) != 1 || mounts[providers.Providers[0].Options.Path] == "" {
		t.Errorf("grafana's boards are read from %+v; mounted: %v", providers, mounts)
	} else if _, err := os.Stat(filepath.Join(mounts[providers.Providers[0].Options.Path], "seckill.json")); err != nil {
		t.Errorf("the board is not in the folder mounted for it: %v", err)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestTheComposeFileIsLockedDown is the security review's finding on the
// compose file, held: Prometheus, Grafana and Jaeger were published on
// every interface without authentication (Prometheus republishing the
// metrics the API guards), Grafana's admin was admin/admin, Redis, the
// sentinels and NATS took anyone, and the instances kept every capability.
// Now every side service is bound to 127.0.0.1; the file refuses to load
// without Grafana's admin password, Redis's and NATS's; the data nodes and
// the sentinels require the password (the local run in
// TestTheComposeRedisRunsHere is refused without it), NATS takes a user;
// the instances drop every capability and cannot gain privileges.
func TestTheComposeFileIsLockedDown(t *testing.T) {
	traced := maps.Clone(composeSecrets)
	p, err := loadCompose(t, traced, "nats", "grafana", "tracing")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"prometheus", "grafana", "jaeger"} {
		s := p.Services[name]
		if len(s.Ports) == 0 {
			t.Errorf("%s publishes no port", name)
		}
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q, want 127.0.0.1 only", name, port.Published, port.HostIP)
			}
		}
	}
	if g := p.Services["grafana"].Environment["GF_SECURITY_ADMIN_PASSWORD"]; g == nil || *g != composeSecrets["GRAFANA_ADMIN_PASSWORD"] {
		t.Errorf("grafana's admin password: %v, want the .env's", g)
	}
	for _, missing := range []string{"GRAFANA_ADMIN_PASSWORD", "REDIS_PASSWORD", "NATS_PASSWORD"} {
		without := maps.Clone(traced)
		delete(without, missing)
		if _, err := loadCompose(t, without, "nats", "grafana", "tracing"); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("loaded without %s: %v, want a refusal naming it", missing, err)
		}
	}
	pw := composeSecrets["REDIS_PASSWORD"]
	for _, name := range redisNodes {
		cmd := strings.Join(p.Services[name].Command, " ")
		if !strings.Contains(cmd, "--requirepass "+pw) || !strings.Contains(cmd, "--masterauth "+pw) {
			t.Errorf("%s runs %q: want --requirepass and --masterauth with the .env's password", name, cmd)
		}
	}
	conf := sentinelConf(t, p, "sentinel-1")
	for _, line := range []string{"requirepass " + pw, "sentinel auth-pass seckill " + pw, "sentinel sentinel-pass " + pw} {
		if !strings.Contains(conf, line) {
			t.Errorf("the sentinels' configuration lacks %q", line)
		}
	}
	if cmd := strings.Join(p.Services["nats"].Command, " "); !strings.Contains(cmd, "--user seckill --pass "+composeSecrets["NATS_PASSWORD"]) {
		t.Errorf("nats runs %q: want a user and the .env's password", cmd)
	}
	for _, s := range instances(p) {
		if !slices.Equal(s.CapDrop, []string{"ALL"}) || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: cap_drop %v, security_opt %v; want ALL dropped and no-new-privileges", s.Name, s.CapDrop, s.SecurityOpt)
		}
	}
}
