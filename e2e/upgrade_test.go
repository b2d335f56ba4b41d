//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/membership"
)

// The releases TestUpgradeEtcdhook moves between: e2e/local.sh builds the previous one (E2E_UPGRADE_FROM,
// the commit docs/operations.md §11 names) from git, installs it, and passes its kustomization (its
// manifests/ through its e2e/overlay.sh, with its image) and its registration (its metacontroller/).
var (
	upgradeFrom         = flag.String("e2e.upgrade-from", "", "the previous release (a commit) TestUpgradeEtcdhook upgrades from; empty skips the test")
	upgradeFromManifest = flag.String("e2e.upgrade-from-manifests", "", "the previous release's kustomization: its manifests/ with its image (its e2e/overlay.sh)")
	upgradeFromReg      = flag.String("e2e.upgrade-from-registration", "", "the previous release's metacontroller/")
	upgradeFromImage    = flag.String("e2e.upgrade-from-image", "localhost/etcdhook:previous", "the previous release's image")
	upgradeToManifest   = flag.String("e2e.upgrade-to-manifests", "", "this checkout's kustomization: manifests/ with its image (e2e/overlay.sh)")
	upgradeToReg        = flag.String("e2e.upgrade-to-registration", "", "this checkout's metacontroller/")
	upgradeToImage      = flag.String("e2e.upgrade-to-image", "localhost/etcdhook:e2e", "this checkout's image")
	installScript       = flag.String("e2e.install", "install.sh", "the install commands (e2e/install.sh)")
)

// upgradeForbidden are the conditions that would say a hook read what the other release wrote as
// foreign or impossible, or refused what it had accepted: none may be true at any moment of an upgrade
// or a downgrade.
var upgradeForbidden = []string{api.CondInputIgnored, api.CondForeignData, api.CondSplitBrain, api.CondInvalidSpec,
	api.CondCertificatesInvalid, api.CondRestoreFailed, api.CondBackupFailing, api.CondDataCorrupt}

// installRelease runs e2e/install.sh with a kustomization and a registration, as a user upgrades
// (docs/operations.md §11), and returns how long it took.
func installRelease(t *testing.T, what, kustomization, registration string) time.Duration {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("bash", *installScript, kustomization, registration)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+*kubeconfig)
	out, err := cmd.CombinedOutput()
	t.Logf("install %s (%s, %s):\n%s", what, kustomization, registration, out)
	require.NoError(t, err, "install %s", what)
	return time.Since(start)
}

// hookImage is the image the installed hook hands to the agents and Jobs (ETCDHOOK_IMAGE).
func hookImage(t *testing.T) string {
	t.Helper()
	d, err := theEnv.kube.AppsV1().Deployments(hookNamespace).Get(context.Background(), "etcdhook", metav1.GetOptions{})
	require.NoError(t, err)
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "ETCDHOOK_IMAGE" {
				return e.Value
			}
		}
	}
	t.Fatal("the hook Deployment sets no ETCDHOOK_IMAGE")
	return ""
}

func (s *scenario) statefulSet() *appsv1.StatefulSet {
	s.t.Helper()
	return read(s, "the StatefulSet", func() (*appsv1.StatefulSet, error) {
		return s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.names().StatefulSet(), metav1.GetOptions{})
	})
}

// agentImage is the image of the members' install-agent init container: the hook's own.
func agentImage(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.InitContainers {
		if c.Name == "install-agent" {
			return c.Image
		}
	}
	return ""
}

// templateBut is the pod template as JSON with the install-agent image left out: what must not change
// when only the hook's image does.
func templateBut(sts *appsv1.StatefulSet) string {
	tpl := sts.Spec.Template.DeepCopy()
	for i := range tpl.Spec.InitContainers {
		if tpl.Spec.InitContainers[i].Name == "install-agent" {
			tpl.Spec.InitContainers[i].Image = ""
		}
	}
	b, _ := json.Marshal(tpl)
	return string(b)
}

// rolledTo: the StatefulSet's template names image and every pod runs it, and the cluster is settled.
func (s *scenario) rolledTo(image string, size int) bool {
	sts := s.statefulSet()
	return agentImage(sts) == image && sts.Status.ObservedGeneration == sts.Generation && sts.Spec.Replicas != nil &&
		sts.Status.UpdatedReplicas == *sts.Spec.Replicas && sts.Status.CurrentRevision == sts.Status.UpdateRevision && s.settled(size)()
}

// memberIDsByName is the status's members by name.
func memberIDsByName(ec *api.EtcdCluster) map[string]string {
	out := map[string]string{}
	for _, m := range ec.Status.Members {
		out[m.Name] = m.ID
	}
	return out
}

// upgradeWatch samples, every second while a hook changes, each cluster's member pods (every
// incarnation of every pod name, and its containers' restart count), the conditions that are true and
// the phases, so that a restart, a second roll or a condition that lasted a few seconds is seen.
type upgradeWatch struct {
	clusters []*scenario
	mu       sync.Mutex
	uids     map[string][]types.UID // ns/pod: the incarnations seen, in order
	restarts map[types.UID]int32    // an incarnation's highest restart count
	conds    map[string]map[string]string
	phases   map[string][]string
	stop     chan struct{}
	done     sync.WaitGroup
}

func watchUpgrade(clusters []*scenario) *upgradeWatch {
	w := &upgradeWatch{clusters: clusters, uids: map[string][]types.UID{}, restarts: map[types.UID]int32{},
		conds: map[string]map[string]string{}, phases: map[string][]string{}, stop: make(chan struct{})}
	w.sample()
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				w.sample()
			}
		}
	}()
	return w
}

func (w *upgradeWatch) sample() {
	for _, s := range w.clusters {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pods, perr := s.e.kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelInstance + "=" + s.name + "," + api.LabelComponent + "=etcd"})
		u, cerr := s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Get(ctx, s.name, metav1.GetOptions{})
		cancel()
		var ec api.EtcdCluster
		if cerr == nil {
			cerr = runtimeFromUnstructured(u, &ec)
		}
		w.mu.Lock()
		if perr == nil {
			for _, p := range pods.Items {
				key := s.ns + "/" + p.Name
				if !containsUID(w.uids[key], p.UID) {
					w.uids[key] = append(w.uids[key], p.UID)
				}
				var n int32
				for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
					n += c.RestartCount
				}
				if n > w.restarts[p.UID] {
					w.restarts[p.UID] = n
				}
			}
		}
		if cerr == nil {
			if w.conds[s.ns] == nil {
				w.conds[s.ns] = map[string]string{}
			}
			for _, c := range ec.Status.Conditions {
				typ := c.Type
				if typ == api.CondAvailable && c.Status != metav1.ConditionTrue {
					typ = notAvailable
				} else if c.Status != metav1.ConditionTrue {
					continue
				}
				if w.conds[s.ns][typ] == "" {
					w.conds[s.ns][typ] = c.Reason + ": " + c.Message
				}
			}
			if ph := w.phases[s.ns]; ec.Status.Phase != "" && (len(ph) == 0 || ph[len(ph)-1] != ec.Status.Phase) {
				w.phases[s.ns] = append(ph, ec.Status.Phase)
			}
		}
		w.mu.Unlock()
	}
}

// notAvailable is the key under which upgradeWatch keeps the first Available condition that was not true.
const notAvailable = "Available=False"

func containsUID(l []types.UID, u types.UID) bool {
	for _, x := range l {
		if x == u {
			return true
		}
	}
	return false
}

func (w *upgradeWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.done.Wait()
}

// check fails the test on a forbidden condition, a container restart, or a member pod replaced more
// than once; a paused cluster's pods are never replaced, and the clusters in quorumKept never lose
// quorum. An Available condition that was not true for a moment is reported, not failed: a roll's
// restart of the leader can leave the others' health reports behind for a few seconds, as in any roll.
// It returns, per cluster, the pods replaced.
func (w *upgradeWatch) check(t *testing.T, what string, paused *scenario, quorumKept ...*scenario) map[string]int {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	replaced := map[string]int{}
	for _, s := range w.clusters {
		for _, typ := range upgradeForbidden {
			require.Empty(t, w.conds[s.ns][typ], "%s: %s/%s had condition %s", what, s.ns, s.name, typ)
		}
		for _, q := range quorumKept {
			if q == s {
				require.Empty(t, w.conds[s.ns][api.CondQuorumLost], "%s: %s/%s lost quorum", what, s.ns, s.name)
			}
		}
		t.Logf("%s: %s/%s phases %v, conditions true at some moment (%s: not true): %v", what, s.ns, s.name, w.phases[s.ns], notAvailable, w.conds[s.ns])
	}
	keys := make([]string, 0, len(w.uids))
	for k := range w.uids {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ns, _, _ := strings.Cut(k, "/")
		uids := w.uids[k]
		for _, u := range uids {
			require.Zero(t, w.restarts[u], "%s: pod %s (uid %s) had a container restarted", what, k, u)
		}
		require.LessOrEqual(t, len(uids), 2, "%s: pod %s replaced more than once: %v", what, k, uids)
		if paused != nil && ns == paused.ns {
			require.Len(t, uids, 1, "%s: pod %s of the paused cluster was replaced", what, k)
		}
		replaced[ns] += len(uids) - 1
	}
	return replaced
}

// upgradeAuth is spec.auth with one role and one user on its own prefix.
func upgradeAuth(enabled bool) map[string]any {
	return map[string]any{"enabled": enabled,
		"roles": []any{map[string]any{"name": "app", "permissions": []any{map[string]any{"key": "app/", "prefix": true, "access": "readwrite"}}}},
		"users": []any{map[string]any{"name": "app", "roles": []any{"app"}}}}
}

// putAs writes key through the client Service with the certificate of the Secret named secret, as an
// application holding it would.
func (s *scenario) putAs(secret, key string) error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{s.clientEndpoint()}, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
		TLS: membership.ReloadingClientTLS(func() (map[string][]byte, error) { return s.secretData(secret) })})
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cl.Put(ctx, key, "v")
	return err
}

// authEnforced: status.auth says etcd enforces what spec.auth declares; the user's Secret writes its
// prefix; the shared client Secret (no etcd user) is refused. The user's write is asked again for a
// minute: right after a roll the Service may still send a call to a pod that is not serving yet.
func (s *scenario) authEnforced(what string) {
	s.t.Helper()
	n := s.names()
	s.authApplied(what+": status.auth enforced and in sync", true)
	var err error
	s.waitFor(what+": the user's Secret writes", time.Minute, func() bool {
		err = s.putAs(n.Cluster+"-user-app", "app/"+strings.ReplaceAll(what, " ", "-"))
		return err == nil
	})
	err = s.putAs(n.ClientSecret(), "app/shared")
	require.Error(s.t, err, "%s: the shared client Secret is no etcd user while auth is on", what)
	require.Contains(s.t, err.Error(), "permission denied", "%s: refused by auth, not by a failure", what)
}

// continuousPointMoves writes a key and waits until the continuous backup's restorable point reaches
// its revision, in a report made after since.
func (s *scenario) continuousPointMoves(what string, since time.Time) time.Duration {
	s.t.Helper()
	var rev int64
	s.waitFor(what+": a write", time.Minute, func() bool {
		cl, err := s.newClient([]string{s.clientEndpoint()})
		if err != nil {
			return false
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cl.Put(ctx, "/upgrade/"+strings.ReplaceAll(what, " ", "-"), "v")
		if err != nil {
			return false
		}
		rev = resp.Header.Revision
		return true
	})
	start := time.Now()
	s.waitFor(what+": the continuous backup's point past the write", 3*time.Minute, func() bool {
		c := s.cluster().Status.Backup
		return c != nil && c.Continuous != nil && c.Continuous.Revision >= rev && c.Continuous.ReportTime != nil && c.Continuous.ReportTime.After(since)
	})
	return time.Since(start)
}

// TestUpgradeEtcdhook: etcdhook itself upgraded under running clusters, as users meet every release
// (docs/operations.md §11). With the previous release installed (e2e/local.sh, E2E_UPGRADE_FROM), five
// clusters in the states users have: 3 members on TLS (the default) under a writer; 1 with continuous
// backup to MinIO; 1 with auth enforced (a user and a role); 1 paused once settled; 1 scaling 1→3, applied
// just before the upgrade so that a join is in flight when the hook changes. Then this checkout installed
// by the documented commands (e2e/install.sh), the previous release again (the downgrade), and this
// checkout again. Each time: no container restart, no member pod replaced but by the one roll §11 names
// (the install-agent image is the hook's) and none of the paused cluster's; the pod template otherwise
// unchanged; the same members and cluster ID; no condition of input read as foreign or refused; every
// cluster back to its phase, the continuous backup's point moving, auth still enforced, and no
// acknowledged write lost.
// upgradeSpec is the suite's spec with the default deadMemberSeconds (300): below 210, efde95f's hook can
// take a healthy member for dead in the moment the downgrade's roll has deleted its pod, and replace it
// (a fault this release fixes, docs/operations.md §11.2, sync's TestRolledPodIsNotDeath).
func upgradeSpec(size int) map[string]any {
	s := spec(size, *etcdVersion)
	s["timeouts"].(map[string]any)["deadMemberSeconds"] = int64(api.DefaultDeadMemberSeconds)
	return s
}

func TestUpgradeEtcdhook(t *testing.T) {
	if *upgradeFrom == "" {
		t.Skip("-e2e.upgrade-from is not set: e2e/local.sh runs this test alone when E2E_UPGRADE_FROM is")
	}
	for name, v := range map[string]string{"-e2e.upgrade-from-manifests": *upgradeFromManifest, "-e2e.upgrade-from-registration": *upgradeFromReg,
		"-e2e.upgrade-to-manifests": *upgradeToManifest, "-e2e.upgrade-to-registration": *upgradeToReg} {
		require.NotEmpty(t, v, "%s is required", name)
	}
	from, to := *upgradeFromImage, *upgradeToImage
	require.NotEqual(t, from, to)
	require.Equal(t, from, hookImage(t), "the previous release %s is installed (e2e/local.sh)", *upgradeFrom)
	started := time.Now()

	// The clusters, created by the previous release.
	endpoint := startMinIO(t)
	dest := fmt.Sprintf("s3://%s/upgrade?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, endpoint)
	tlsC, backupC, authC := newScenario(t, "up-tls"), newScenario(t, "up-backup"), newScenario(t, "up-auth")
	pausedC, scaleC := newScenario(t, "up-paused"), newScenario(t, "up-scale")
	all := []*scenario{tlsC, backupC, authC, pausedC, scaleC}
	size := map[*scenario]int{tlsC: 3, backupC: 1, authC: 1, pausedC: 1, scaleC: 3}
	tlsC.apply(upgradeSpec(3))
	bsp := upgradeSpec(1)
	bsp["backup"] = map[string]any{"destination": dest, "credentialsSecret": backupC.credentialsSecret(), "continuous": map[string]any{}}
	backupC.apply(bsp)
	asp := upgradeSpec(1)
	asp["auth"] = upgradeAuth(false)
	authC.apply(asp)
	pausedC.apply(upgradeSpec(1))
	scaleC.apply(upgradeSpec(1))
	for _, s := range all {
		want := size[s]
		if s == scaleC {
			want = 1
		}
		// Five clusters start at once on the node: twice a step's time.
		s.waitFor("settled under "+*upgradeFrom, 2*stepTimeout, s.settled(want))
	}
	authC.authApplied("the user and role created", false)
	asp["auth"] = upgradeAuth(true)
	authC.apply(asp)
	authC.authEnforced("under " + *upgradeFrom)
	backupC.waitFor("the writer's first restorable point", stepTimeout, func() bool {
		b := backupC.cluster().Status.Backup
		return b != nil && b.Continuous != nil && b.Continuous.Revision > 0
	})
	pausedC.apply(map[string]any{"paused": true})
	pausedC.waitFor("phase Paused", time.Minute, func() bool { return pausedC.cluster().Status.Phase == api.PhasePaused })
	w := tlsC.startWriter("under " + *upgradeFrom)
	created := time.Since(started)

	type seen struct {
		template string
		members  map[string]string
		id       string
	}
	snapshot := func(image string) map[*scenario]seen {
		out := map[*scenario]seen{}
		for _, s := range all {
			sts := s.statefulSet()
			require.Equal(t, image, agentImage(sts), "%s/%s runs the agent of %s", s.ns, s.name, image)
			ec := s.cluster()
			out[s] = seen{templateBut(sts), memberIDsByName(ec), ec.Status.ClusterID}
		}
		return out
	}
	// converge waits until every cluster is back: on image (the paused one: its template, never its pods)
	// and settled, Paused for the paused one, and compares with before; it returns when each got there.
	converge := func(what, image string, since time.Time, before map[*scenario]seen) map[*scenario]time.Duration {
		took := map[*scenario]time.Duration{}
		pausedUIDs := pausedC.podRestarts()
		for deadline := time.Now().Add(15 * time.Minute); len(took) < len(all); time.Sleep(time.Second) {
			var waiting []string
			for _, s := range all {
				if _, ok := took[s]; ok {
					continue
				}
				done := false
				if s == pausedC {
					done = agentImage(s.statefulSet()) == image && s.cluster().Status.Phase == api.PhasePaused
				} else {
					done = s.rolledTo(image, size[s])
				}
				if done {
					took[s] = time.Since(since)
					continue
				}
				sts, ec := s.statefulSet(), s.cluster()
				waiting = append(waiting, fmt.Sprintf("%s/%s: agent %s, StatefulSet updated %d of %d (revision %s, current %s), phase %s, %d members, message %q",
					s.ns, s.name, agentImage(sts), sts.Status.UpdatedReplicas, sts.Status.Replicas, sts.Status.UpdateRevision, sts.Status.CurrentRevision,
					ec.Status.Phase, len(ec.Status.Members), ec.Status.Message))
			}
			if len(waiting) > 0 && time.Now().After(deadline) {
				t.Fatalf("%s: after 15m, clusters not back on %s:\n%s", what, image, strings.Join(waiting, "\n"))
			}
		}
		for _, s := range all {
			sts := s.statefulSet()
			require.Equal(t, before[s].template, templateBut(sts), "%s: %s/%s's pod template changed beyond the install-agent image", what, s.ns, s.name)
			ec := s.cluster()
			require.Equal(t, before[s].id, ec.Status.ClusterID, "%s: %s/%s is the same etcd cluster", what, s.ns, s.name)
			after := memberIDsByName(ec)
			require.Len(t, after, size[s], "%s: %s/%s's members", what, s.ns, s.name)
			for name, id := range before[s].members { // the scaling cluster: its first member among them
				require.Equal(t, id, after[name], "%s: %s/%s's member %s is the same member", what, s.ns, s.name, name)
			}
		}
		require.Equal(t, pausedUIDs, pausedC.podRestarts(), "%s: the paused cluster's pods", what)
		require.Equal(t, api.PhasePaused, pausedC.cluster().Status.Phase)
		return took
	}
	report := func(took map[*scenario]time.Duration, replaced map[string]int) string {
		var parts []string
		for _, s := range all {
			parts = append(parts, fmt.Sprintf("%s %s (pods replaced: %d)", strings.TrimPrefix(s.ns[:strings.LastIndex(s.ns, "-")], "e2e-up-"), took[s].Round(time.Second), replaced[s.ns]))
		}
		return strings.Join(parts, ", ")
	}

	// The upgrade, with a scale 1→3 just applied: a join in flight when the hook changes.
	before := snapshot(from)
	scaleC.apply(map[string]any{"size": int64(3)})
	scaleC.waitFor("the scale's first join under "+*upgradeFrom, 2*time.Minute, func() bool {
		sts := scaleC.statefulSet()
		return sts.Spec.Replicas != nil && *sts.Spec.Replicas >= 2
	})
	scaleState := func(when string) {
		ec, sts := scaleC.cluster(), scaleC.statefulSet()
		var ms []string
		for _, m := range ec.Status.Members {
			ms = append(ms, fmt.Sprintf("%s %s healthy=%t", m.Name, m.Role, m.Healthy))
		}
		t.Logf("the scaling cluster %s: StatefulSet replicas %d, phase %s, members %v, message %q", when, *sts.Spec.Replicas, ec.Status.Phase, ms, ec.Status.Message)
	}
	scaleState("when the upgrade starts")
	w.Step("upgrade")
	watch := watchUpgrade(all)
	upStart := time.Now()
	upInstall := installRelease(t, "this checkout over "+*upgradeFrom, *upgradeToManifest, *upgradeToReg)
	require.Equal(t, to, hookImage(t))
	scaleState("when the new hook's pods run")
	upTook := converge("upgrade", to, upStart, before)
	watch.Stop()
	upReplaced := watch.check(t, "upgrade", pausedC, tlsC)
	for _, s := range all {
		if s != pausedC {
			require.Positive(t, upReplaced[s.ns], "upgrade: %s/%s rolled to the new agent", s.ns, s.name)
		}
	}
	upBackup := backupC.continuousPointMoves("after the upgrade", upStart)
	authC.authEnforced("after the upgrade")
	upTotal := time.Since(upStart)

	// The downgrade: the previous release's manifests and registration again.
	w.Step("downgrade")
	before = snapshot(to)
	watch = watchUpgrade(all)
	downStart := time.Now()
	downInstall := installRelease(t, *upgradeFrom+" over this checkout (downgrade)", *upgradeFromManifest, *upgradeFromReg)
	require.Equal(t, from, hookImage(t))
	downTook := converge("downgrade", from, downStart, before)
	watch.Stop()
	downReplaced := watch.check(t, "downgrade", pausedC, tlsC)
	for _, s := range all {
		if s != pausedC {
			require.Positive(t, downReplaced[s.ns], "downgrade: %s/%s rolled back to the old agent", s.ns, s.name)
		}
	}
	downBackup := backupC.continuousPointMoves("after the downgrade", downStart)
	authC.authEnforced("after the downgrade")
	downTotal := time.Since(downStart)
	w.Finish(fmt.Sprintf("etcdhook %s → this checkout → %s, 3 members on TLS under a writer (steps: under %s, upgrade, downgrade)\n\n", *upgradeFrom, *upgradeFrom, *upgradeFrom))

	// This checkout again, for the suite that follows; the clusters go first (they would roll once more).
	for _, s := range all {
		err := s.e.kube.CoreV1().Namespaces().Delete(s.ctx, s.ns, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
	again := installRelease(t, "this checkout again", *upgradeToManifest, *upgradeToReg)
	require.Equal(t, to, hookImage(t))

	summary := fmt.Sprintf("| phase | time |\n|---|---|\n"+
		"| five clusters created and settled under %s (auth enabled, continuous backup's first point, one paused, writer started) | %s |\n"+
		"| upgrade: e2e/install.sh of this checkout (apply -k, CRD Established, apply -k the registration, hook rolled) | %s |\n"+
		"| upgrade: each cluster back on the new agent and settled, from the install's start | %s |\n"+
		"| upgrade: continuous backup's point past a write made after it | %s |\n"+
		"| upgrade: whole (install to every check passed) | %s |\n"+
		"| downgrade: e2e/install.sh of %s | %s |\n"+
		"| downgrade: each cluster back on the old agent and settled | %s |\n"+
		"| downgrade: continuous backup's point past a write made after it | %s |\n"+
		"| downgrade: whole | %s |\n"+
		"| this checkout installed again (clusters deleted first) | %s |\n"+
		"| whole test | %s |\n",
		*upgradeFrom, created.Round(time.Second), upInstall.Round(time.Second), report(upTook, upReplaced), upBackup.Round(time.Second), upTotal.Round(time.Second),
		*upgradeFrom, downInstall.Round(time.Second), report(downTook, downReplaced), downBackup.Round(time.Second), downTotal.Round(time.Second),
		again.Round(time.Second), time.Since(started).Round(time.Second))
	results.add(t.Name(), summary)
	t.Logf("\n%s", summary)
}
