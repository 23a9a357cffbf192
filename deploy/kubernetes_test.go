package deploy_test

import (
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/seckill-lab/seckill/app/server"
)

// manifests are deploy/kubernetes/seckill.yaml's objects, each decoded
// strictly: a misspelt or misplaced field fails, as kubectl's server-side
// validation would.
type manifests struct {
	config     corev1.ConfigMap
	secret     corev1.Secret
	deployment appsv1.Deployment
	service    corev1.Service
	budget     policyv1.PodDisruptionBudget
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	raw, err := os.ReadFile("kubernetes/seckill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	into := map[string]any{"ConfigMap": &m.config, "Secret": &m.secret, "Deployment": &m.deployment,
		"Service": &m.service, "PodDisruptionBudget": &m.budget}
	seen := map[string]bool{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		obj, ok := into[head.Kind]
		if !ok || seen[head.Kind] {
			t.Fatalf("a %q document: want one each of %v", head.Kind, slices.Sorted(maps.Keys(into)))
		}
		seen[head.Kind] = true
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v", head.Kind, err)
		}
	}
	if len(seen) != len(into) {
		t.Fatalf("found %v, want every one of %d kinds", seen, len(into))
	}
	return m
}

// TestTheKubernetesManifestsDeployTheServerAsTheDocsSay: the manifests
// decode strictly, and say what docs/production.md asks of a deployment:
// two replicas at least, never fewer than one through a disruption; ready
// on /readyz, alive on /healthz; a grace period past the server's 9 s stop
// and the preStop wait; resources; the image's non-root user; every
// setting a variable the server reads, the secret ones in the Secret.
func TestTheKubernetesManifestsDeployTheServerAsTheDocsSay(t *testing.T) {
	m := readManifests(t)
	d := m.deployment.Spec
	if d.Replicas == nil || *d.Replicas < 2 {
		t.Errorf("replicas %v, want at least 2", d.Replicas)
	}
	pod := d.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want the server alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	checkProbes(t, c)
	preStop := int64(0)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	grace := int64(30) // Kubernetes' default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = *pod.TerminationGracePeriodSeconds
	}
	if preStop < 3 || grace < preStop+10 {
		t.Errorf("preStop sleep %ds, grace %ds: want a wait for the endpoints, then the 9 s stop, within the grace", preStop, grace)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requested and memory limited", c.Resources)
	}
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("pod security context %+v: want non-root, as the image's user 65532", sc)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem ||
		c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v: want a read-only root and no privilege escalation", c.SecurityContext)
	}
	checkSettings(t, m, c)
	labels := d.Template.Labels
	for what, selector := range map[string]map[string]string{"deployment": d.Selector.MatchLabels, "service": m.service.Spec.Selector,
		"disruption budget": m.budget.Spec.Selector.MatchLabels} {
		for k, v := range selector {
			if labels[k] != v || len(selector) == 0 {
				t.Errorf("the %s selects %v; the pods are labelled %v", what, selector, labels)
			}
		}
	}
	if b := m.budget.Spec.MinAvailable; b == nil || b.IntValue() < 1 || d.Replicas == nil || b.IntValue() >= int(*d.Replicas) {
		t.Errorf("disruption budget minAvailable %v with %v replicas: want at least 1, fewer than the replicas", b, d.Replicas)
	}
}

// checkProbes: readiness is /readyz, liveness /healthz, both on the port
// the server listens on (SECKILL_ADDR's default, the image's).
func checkProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	port := func(name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		return 0
	}
	for what, probe := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != what || port(probe.HTTPGet.Port.String()) != 8080 {
			t.Errorf("want a probe GET %s on the API's port 8080; got %+v", what, probe)
		}
	}
}

// checkSettings: every ConfigMap and Secret key is a variable the server
// reads, none in both, the secrets in the Secret; both reach the
// container; the metrics listener is a port the pod declares.
func checkSettings(t *testing.T, m manifests, c corev1.Container) {
	t.Helper()
	declared := map[string]bool{}
	for _, v := range server.Variables() {
		declared[v.Name] = true
	}
	secrets := []string{"SECKILL_JWT_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_CODE_WEBHOOK_SECRET", "SECKILL_PAY_SECRET", "SECKILL_MYSQL_DSN"}
	for name := range m.config.Data {
		if !declared[name] {
			t.Errorf("the ConfigMap sets %s, which the server does not read", name)
		}
		if slices.Contains(secrets, name) {
			t.Errorf("the ConfigMap holds %s, a secret", name)
		}
		if _, both := m.secret.StringData[name]; both {
			t.Errorf("%s is in the ConfigMap and the Secret", name)
		}
	}
	for name := range m.secret.StringData {
		if !declared[name] {
			t.Errorf("the Secret sets %s, which the server does not read", name)
		}
	}
	for _, name := range []string{"SECKILL_JWT_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_MYSQL_DSN"} {
		if _, ok := m.secret.StringData[name]; !ok {
			t.Errorf("the Secret lacks %s, which real servers require", name)
		}
	}
	var fromConfig, fromSecret bool
	for _, e := range c.EnvFrom {
		fromConfig = fromConfig || (e.ConfigMapRef != nil && e.ConfigMapRef.Name == m.config.Name)
		fromSecret = fromSecret || (e.SecretRef != nil && e.SecretRef.Name == m.secret.Name)
	}
	if !fromConfig || !fromSecret {
		t.Errorf("the container takes its environment from the ConfigMap %v and the Secret %v; want both", fromConfig, fromSecret)
	}
	if addr := m.config.Data["SECKILL_METRICS_ADDR"]; addr != "" {
		_, port, _ := net.SplitHostPort(addr)
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return strconv.Itoa(int(p.ContainerPort)) == port }) {
			t.Errorf("SECKILL_METRICS_ADDR=%s: the pod declares no such port", addr)
		}
	}
}
