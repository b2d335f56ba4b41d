//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// rpoWriter writes at a fixed total rate through the client Service from several goroutines, and keeps
// when each write was acknowledged: after a loss and a restore, the acknowledged writes missing say how
// much the restore lost, in seconds before the loss.
type rpoWriter struct {
	mu    sync.Mutex
	acked map[string]time.Time
	sent  int
	stop  chan struct{}
	done  sync.WaitGroup
}

// startRPOWriter writes rate puts per second (workers goroutines, each its own key sequence) until
// stopped or max writes were sent: bounded in count, and in time by the caller's stop.
func startRPOWriter(cl *clientv3.Client, rate, workers, max int) *rpoWriter {
	w := &rpoWriter{acked: map[string]time.Time{}, stop: make(chan struct{})}
	every := time.Duration(workers) * time.Second / time.Duration(rate)
	for g := range workers {
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for n := 0; n < max/workers; n++ {
				select {
				case <-w.stop:
					return
				case <-t.C:
				}
				key := fmt.Sprintf("rpo/%d/%07d", g, n)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := cl.Put(ctx, key, "v")
				cancel()
				w.mu.Lock()
				w.sent++
				if err == nil {
					w.acked[key] = time.Now()
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *rpoWriter) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.done.Wait()
}

// keysUnder is the keys under prefix, in order, as cl reads them.
func keysUnder(t *testing.T, cl *clientv3.Client, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := cl.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// TestContinuousBackupRPO is issue 27's RPO scenario under the real Metacontroller: a 3-member cluster
// with continuous backup to MinIO, a writer at 200 writes/s through the client Service; every member's
// pod and claim deleted at once (the loss); the EtcdCluster re-created under its name from
// <destination>/latest. The acknowledged writes missing afterwards must be a suffix of the writes (every
// write acknowledged before the first missing one is there), and their span before the loss is the
// figure reported (goal: at most 5 s). Encrypted at rest (spec.backup.encryption, §16.11): the stored
// manifests say so, and the re-created cluster restores with the same Secret.
func TestContinuousBackupRPO(t *testing.T) {
	beside(t)
	endpoint := startMinIO(t)
	dest := fmt.Sprintf("s3://%s/rpo?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, endpoint)
	s := newScenario(t, "rpo")
	keys := s.encryptionSecret()
	backupSpec := map[string]any{"destination": dest, "credentialsSecret": s.credentialsSecret(), "continuous": map[string]any{},
		"encryption": map[string]any{"secretName": keys}}
	s.apply(map[string]any{"size": 3, "version": *etcdVersion, "backup": backupSpec})
	s.waitFor("the cluster", stepTimeout, s.settled(3))
	firstPoint := s.waitFor("the writer's first restorable point", stepTimeout, func() bool {
		b := s.cluster().Status.Backup
		return b != nil && b.Continuous != nil && b.Continuous.Revision > 0
	})

	cl, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(t, err)
	defer cl.Close()
	const rate = 200
	w := startRPOWriter(cl, rate, 4, 60*rate)
	defer w.Stop()
	time.Sleep(30 * time.Second) // the load before the loss (bounded: the writer's own count bounds it too)

	// The loss: every member's pod and claim deleted at once.
	lossAt := time.Now()
	sel := metav1.ListOptions{LabelSelector: api.LabelInstance + "=" + s.name + "," + api.LabelComponent + "=" + api.ComponentEtcd}
	require.NoError(t, s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{}, sel))
	require.NoError(t, s.e.kube.CoreV1().Pods(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, sel))
	time.Sleep(5 * time.Second) // writes go on failing: the loss is real for clients
	w.Stop()
	// The writer uploads what it held at its chunk interval (5 s) and reports within 15 s.
	s.waitFor("the writer's report after the loss", 2*time.Minute, func() bool {
		c := s.cluster().Status.Backup.Continuous
		return c != nil && c.ReportTime != nil && c.ReportTime.After(lossAt.Add(6*time.Second))
	})
	point := s.cluster().Status.Backup.Continuous
	// Every snapshot the writer stored is encrypted (the chunks are checked by the membership tests).
	mc := minioClient(endpoint)
	listed, err := mc.ListObjectsV2(s.ctx, &s3.ListObjectsV2Input{Bucket: aws.String(e2eBucket), Prefix: aws.String("rpo/" + backup.ClusterDir(s.ns, s.name)), Delimiter: aws.String("/")})
	require.NoError(t, err)
	var encrypted int
	for _, o := range listed.Contents {
		if !strings.HasSuffix(*o.Key, ".json") {
			continue
		}
		obj, err := mc.GetObject(s.ctx, &s3.GetObjectInput{Bucket: aws.String(e2eBucket), Key: o.Key})
		require.NoError(t, err)
		var m backup.Manifest
		require.NoError(t, json.NewDecoder(obj.Body).Decode(&m))
		obj.Body.Close()
		require.Equal(t, backup.EncryptionAge, m.Encryption, "%s", *o.Key)
		encrypted++
	}
	require.Positive(t, encrypted, "the writer's snapshot")

	// Re-created under its name from the newest point: the old claims must go first (a new cluster
	// refuses foreign data).
	require.NoError(t, s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Delete(s.ctx, s.name, metav1.DeleteOptions{}))
	s.waitFor("the old cluster gone", stepTimeout, func() bool {
		_, err := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
		_, werr := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.names().BackupWriter(), metav1.GetOptions{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(werr) && len(s.pods()) == 0
	})
	require.NoError(t, s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{}, sel))
	s.waitFor("the old claims gone", stepTimeout, func() bool { return len(s.pvcs()) == 0 })
	latest := fmt.Sprintf("s3://%s/rpo/latest?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, endpoint)
	s.apply(map[string]any{"size": 3, "version": *etcdVersion, "backup": backupSpec,
		"restore": map[string]any{"from": latest, "credentialsSecret": s.credentialsSecret(), "encryption": map[string]any{"secretName": keys}}})
	restoreTook := s.waitFor("the restored cluster", 2*stepTimeout, s.settled(3))
	rs := s.cluster().Status.Restore
	require.NotNil(t, rs)
	require.Equal(t, "Restored", rs.Phase)

	// What came back: every acknowledged write up to the first missing one, and none missing after an
	// acknowledged one that is there (a suffix).
	cl2, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(t, err)
	defer cl2.Close()
	present := map[string]bool{}
	for _, k := range keysUnder(t, cl2, "rpo/") {
		present[k] = true
	}
	type ack struct {
		key string
		at  time.Time
	}
	var acks []ack
	for k, at := range w.acked {
		acks = append(acks, ack{k, at})
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i].at.Before(acks[j].at) })
	var missing []ack
	for _, a := range acks {
		if !present[a.key] {
			missing = append(missing, a)
		}
	}
	window := time.Duration(0)
	if len(missing) > 0 {
		first := missing[0].at
		window = lossAt.Sub(first)
		for _, a := range acks {
			if a.at.Before(first) {
				require.True(t, present[a.key], "%s, acknowledged at %s before the first missing write, is missing", a.key, a.at)
			}
		}
	}
	require.NotEmpty(t, acks)
	t.Logf("acknowledged %d of %d writes; %d missing after the restore, the first acknowledged %s before the loss; restored revision %d",
		len(acks), w.sent, len(missing), window, rs.Revision)
	results.add(t.Name(), fmt.Sprintf("| figure | value |\n|---|---|\n"+
		"| writer | %d writes/s through the client Service, 4 clients, 30 s before the loss |\n"+
		"| continuous backup: the first restorable point reported, after the cluster settled | %s (0: already reported when it settled) |\n"+
		"| writes acknowledged before the loss | %d (of %d sent, the rest failed with the loss) |\n"+
		"| acknowledged writes missing after the restore | %d |\n"+
		"| loss window (the loss minus the first missing write's acknowledgement; goal at most 5 s) | %s |\n"+
		"| newest restorable point reported after the loss | revision %d at %s (%s after the loss instant) |\n"+
		"| re-create from /latest to Available with 3 members | %s (restored revision %d) |\n",
		rate, firstPoint.Round(100*time.Millisecond), len(acks), w.sent, len(missing), window.Round(time.Millisecond),
		point.Revision, point.Time.UTC().Format(time.RFC3339), point.Time.Sub(lossAt).Round(100*time.Millisecond),
		restoreTook.Round(100*time.Millisecond), rs.Revision))

	// In place, to a point (etcd.io/restore-to, §16.10): on the restored cluster, 40 keys one by one;
	// once the writer covers the last, the cluster is restored in place to the revision of the 20th.
	type put struct {
		key string
		rev int64
	}
	var puts []put
	for i := range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := cl2.Put(ctx, fmt.Sprintf("pit/%02d", i), "v")
		cancel()
		require.NoError(t, err)
		puts = append(puts, put{fmt.Sprintf("pit/%02d", i), r.Header.Revision})
	}
	s.waitFor("the writer to cover the last key", 2*time.Minute, func() bool {
		c := s.cluster().Status.Backup.Continuous
		return c != nil && c.Revision >= puts[len(puts)-1].rev
	})
	// What the plugin shows before a restore to a point (README, backup-restore.md): the snapshots and
	// the revisions their chains reach, then a dry run to a time after the last key (a Job restores
	// into scratch space with the writer's store access: every key's revision reached, nothing touched).
	code, out, _ := s.kubectlEtcd(s.ctx, "backups", s.name)
	require.Equal(t, 0, code, "kubectl etcd backups")
	require.Regexp(t, `(?m)^\S+\.db\s.*\s\d+ chunks`, out, "a snapshot and the chain after it")
	after := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
	code, out, _ = s.kubectlEtcd(s.ctx, "restore", s.name, "--in-place", "--to-time", after, "--dry-run", "--timeout", stepTimeout.String())
	require.Equal(t, 0, code, "kubectl etcd restore --in-place --to-time --dry-run")
	m := regexp.MustCompile(`revision\s+(\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	dryRev, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, dryRev, puts[len(puts)-1].rev, "the dry run reaches the last key")
	require.NotContains(t, s.cluster().Annotations, api.AnnRestoreFrom, "the dry run asked nothing of the cluster")
	to := puts[19].rev
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:"%d"}}}`, api.AnnRestoreFrom, latest, api.AnnRestoreTo, to)
	_, err = s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Patch(s.ctx, s.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	inPlaceTook := s.waitFor("the in-place restore to the point", 2*stepTimeout, func() bool {
		r := s.cluster().Status.Restore
		return r != nil && r.InPlace && r.ToRevision == to && r.Phase == "Restored" && s.settled(3)()
	})
	require.Equal(t, to, s.cluster().Status.Restore.Revision, "restored to exactly the revision asked")
	cl3, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(t, err)
	defer cl3.Close()
	back := keysUnder(t, cl3, "pit/")
	var want []string
	for _, p := range puts[:20] {
		want = append(want, p.key)
	}
	require.Equal(t, want, back, "the keys up to the point, none after it")
	t.Logf("in place to revision %d: %d of 40 keys back, annotation to Available %s", to, len(back), inPlaceTook)
	results.add(t.Name()+"/in place to a point", fmt.Sprintf("| figure | value |\n|---|---|\n"+
		"| restore in place to a revision (etcd.io/restore-to), encrypted backups, annotation to Available with 3 members | %s |\n"+
		"| keys back (of 40 written one by one; the point is the 20th's revision) | %d, none after the point |\n",
		inPlaceTook.Round(100*time.Millisecond), len(back)))
}

// encryptionSecret puts a new age identity into the scenario's namespace (spec.backup.encryption's
// Secret layout) and returns the Secret's name.
func (s *scenario) encryptionSecret() string {
	id, err := age.GenerateX25519Identity()
	require.NoError(s.t, err)
	_, err = s.e.kube.CoreV1().Secrets(s.ns).Create(s.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "backup-keys"},
		StringData: map[string]string{backup.KeyIdentity: id.String() + "\n"},
	}, metav1.CreateOptions{})
	require.NoError(s.t, err)
	return "backup-keys"
}
