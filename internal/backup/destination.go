// Package backup stores etcd snapshots in an object store or on a volume and finds, checks and prunes
// them (docs/design/16-backup-restore.md §16). Storage goes through gocloud.dev/blob: one API over S3, GCS and files, with
// the stores' own SDKs underneath (request signing, multipart uploads, retries are theirs, not ours).
package backup

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob" // gs:// (registers the opener)
	_ "gocloud.dev/blob/s3blob"  // s3://
	"gocloud.dev/gcerrors"
)

// Destination is a parsed spec.backup.destination (or restore source): where the snapshots live.
type Destination struct {
	// Scheme is s3, gs or file.
	Scheme string
	// Bucket is the bucket (s3, gs); empty for file.
	Bucket string
	// Prefix is the folder inside the bucket or under the file root, without leading or trailing slash.
	Prefix string
	// Root is the directory of a file destination.
	Root string
	// params are the store's options the URL carried (s3: endpoint, region, use_path_style,
	// disable_https; gs: endpoint).
	params url.Values
}

// Options each scheme accepts as URL parameters. Anything else is refused by name: a typo must not
// silently send snapshots to the wrong endpoint.
var schemeParams = map[string][]string{
	"s3":   {"endpoint", "region", "use_path_style", "s3ForcePathStyle", "disable_https"},
	"gs":   {"endpoint"},
	"file": {},
}

// ParseDestination checks a destination URL: s3://bucket/prefix?endpoint=…&region=…&use_path_style=true,
// gs://bucket/prefix[?endpoint=http://emulator:port], file:///dir. It names the problem in its error.
func ParseDestination(raw string) (Destination, error) {
	if strings.TrimSpace(raw) == "" {
		return Destination{}, errors.New("is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole value, secrets included: say only what is wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Destination{}, fmt.Errorf("is not a URL: %v", err)
	}
	allowed, ok := schemeParams[u.Scheme]
	if !ok {
		return Destination{}, fmt.Errorf("has scheme %q: want s3://bucket/prefix, gs://bucket/prefix or file:///dir", u.Scheme)
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return Destination{}, errors.New("must not carry user info, an opaque part or a fragment (credentials go in credentialsSecret)")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		// u.Query() would drop the parameter that does not parse, silently: a typo must not either.
		return Destination{}, errors.New("has parameters that do not parse (an escape that is not %XX?)")
	}
	for k := range q {
		if !slices.Contains(allowed, k) {
			return Destination{}, fmt.Errorf("has parameter %q, which %s:// does not take (allowed: %s)", k, u.Scheme, strings.Join(allowed, ", "))
		}
		if len(q[k]) != 1 {
			return Destination{}, fmt.Errorf("has parameter %q more than once", k)
		}
	}
	d := Destination{Scheme: u.Scheme, params: q}
	clean := strings.Trim(path.Clean("/"+u.Path), "/")
	switch u.Scheme {
	case "file":
		if u.Host != "" {
			return Destination{}, fmt.Errorf("has host %q: a file destination is file:///absolute/dir", u.Host)
		}
		if clean == "" {
			return Destination{}, errors.New("is the root directory: name a directory, file:///backups")
		}
		d.Root = "/" + clean
	default:
		if u.Host == "" {
			return Destination{}, errors.New("has no bucket: want " + u.Scheme + "://bucket/prefix")
		}
		d.Bucket, d.Prefix = u.Host, clean
		if e := q.Get("endpoint"); e != "" {
			eu, err := url.Parse(e)
			switch {
			case err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "":
				return Destination{}, fmt.Errorf("has endpoint %q: want http(s)://host[:port]", Redact(e))
			case eu.User != nil:
				// It would show in status, Events and logs: credentials go in credentialsSecret.
				return Destination{}, errors.New("has credentials in its endpoint: put them in credentialsSecret")
			case strings.Trim(eu.Path, "/") != "" || eu.RawQuery != "" || eu.Fragment != "":
				return Destination{}, fmt.Errorf("has endpoint %q with a path, query or fragment: want http(s)://host[:port]", Redact(e))
			case u.Scheme == "gs" && eu.Scheme != "http":
				// The GCS client takes a custom endpoint only as an emulator host, over plain HTTP and
				// without credentials: an https endpoint would silently lose both.
				return Destination{}, fmt.Errorf("has endpoint %q: a gs:// endpoint is for a GCS emulator and must be http://", Redact(e))
			}
		}
	}
	return d, nil
}

// metadataHosts are the clouds' instance metadata services by name and by address outside the
// link-local ranges (a name that resolves elsewhere is not caught: DNS is not read here).
var metadataHosts = map[string]bool{
	"metadata.google.internal": true, "metadata": true, "metadata.goog": true,
	"fd00:ec2::254":   true, // AWS IMDS over IPv6
	"100.100.100.200": true, // Alibaba Cloud
}

// LocalEndpoint says why the destination's endpoint is on this node or its cloud's metadata service
// (a loopback, link-local or unspecified address, or localhost), "" when it is not or there is none.
// Such an endpoint needs an explicit opt-in (api.StoreAccess): from a Job's pod it reaches the node's
// own services, not a store.
func (d Destination) LocalEndpoint() string {
	e := d.params.Get("endpoint")
	if e == "" {
		return ""
	}
	u, err := url.Parse(e)
	if err != nil {
		return ""
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "its endpoint is localhost"
	}
	if metadataHosts[host] {
		return "its endpoint is a cloud metadata service"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	switch ip = ip.Unmap(); {
	case ip.IsLoopback():
		return "its endpoint is a loopback address"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "its endpoint is a link-local address (where cloud metadata services answer)"
	case ip.IsUnspecified():
		return "its endpoint is an unspecified address"
	}
	return ""
}

// splitFolder reads the destination as a cluster's folder: the destination above it and the last two
// path elements as <namespace>/<name>; ok is false when the path is too short to leave a destination
// (a bucket's root is one; a file destination needs a directory).
func (d Destination) splitFolder() (parent Destination, namespace, name string, ok bool) {
	p := d.Prefix
	if d.Scheme == "file" {
		p = strings.TrimPrefix(d.Root, "/")
	}
	parts := strings.Split(p, "/")
	if len(parts) < 2 || (d.Scheme == "file" && len(parts) < 3) {
		return Destination{}, "", "", false
	}
	parent = d
	up := strings.Join(parts[:len(parts)-2], "/")
	if d.Scheme == "file" {
		parent.Root = "/" + up
	} else {
		parent.Prefix = up
	}
	return parent, parts[len(parts)-2], parts[len(parts)-1], true
}

// String is the destination as a URL (the canonical form, stable for comparisons and status).
func (d Destination) String() string {
	u := url.URL{Scheme: d.Scheme, Host: d.Bucket, Path: "/" + d.Prefix, RawQuery: readableQuery(d.params)}
	if d.Scheme == "file" {
		u.Path = d.Root
	}
	return u.String()
}

// ObjectURL is the URL of one object of this destination, with the store's parameters (endpoint,
// region): status.backup.lastSnapshot is a valid spec.restore.from as it stands.
func (d Destination) ObjectURL(key string) string {
	u := url.URL{Scheme: d.Scheme, Host: d.Bucket, Path: "/" + path.Join(d.Prefix, key), RawQuery: readableQuery(d.params)}
	if d.Scheme == "file" {
		u.Path = path.Join(d.Root, key)
	}
	return u.String()
}

// Open opens the destination's bucket, scoped to its prefix. The store's credentials come from the
// environment (see LoadCredentials).
func (d Destination) Open(ctx context.Context) (*blob.Bucket, error) {
	if d.Scheme == "file" {
		if err := os.MkdirAll(d.Root, 0o750); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d.Root, err)
		}
		// No .attrs side files: the snapshot and its manifest are the only files a user sees. Uploads are
		// written beside their final name and renamed into place (NoTempDir): the Jobs' root filesystem,
		// and so os.TempDir, is read-only, and a rename from another filesystem would fail anyway.
		return fileblob.OpenBucket(d.Root, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
	}
	q := url.Values{}
	for k, v := range d.params {
		q[k] = v
	}
	if d.Scheme == "gs" {
		if e := q.Get("endpoint"); e != "" {
			// The GCS client only takes an emulator or compatible endpoint from the environment.
			q.Del("endpoint")
			eu, _ := url.Parse(e)
			if err := os.Setenv("STORAGE_EMULATOR_HOST", eu.Host); err != nil {
				return nil, err
			}
			if os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") == "" {
				q.Set("anonymous", "true")
			}
		}
	}
	u := url.URL{Scheme: d.Scheme, Host: d.Bucket, RawQuery: q.Encode()}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", d, err)
	}
	if d.Prefix != "" {
		b = blob.PrefixedBucket(b, d.Prefix+"/")
	}
	return b, nil
}

// Check tells an unreachable store, a missing bucket and refused credentials apart before any
// snapshot is taken, so that the failure names the cause.
func Check(ctx context.Context, d Destination, b *blob.Bucket) error {
	ok, err := b.IsAccessible(ctx)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.PermissionDenied {
			// The store answered, and said no: the same keys will be refused again.
			return fmt.Errorf("%s refused the credentials: %w: %v", d, ErrCredentials, err)
		}
		return fmt.Errorf("%s is not reachable or refused the credentials: %w", d, err)
	}
	if !ok {
		return fmt.Errorf("%s: bucket %q does not exist: %w", d, d.Bucket, ErrNoBucket)
	}
	return nil
}

// ErrCredentials: the store answered and refused the credentials given (or their absence). Asking again
// with the same ones does not help; a Secret fixed later is read by the next pod.
var ErrCredentials = errors.New("credentials refused")

// ErrNoBucket: the store answered that the bucket does not exist.
var ErrNoBucket = errors.New("no such bucket")

// Terminal says whether err is one another attempt with the same input would meet again: the store
// answered that the bucket, the snapshot or the point is not there, that the data is damaged or not
// this cluster's, or that it refuses the credentials. Anything else (a store that did not answer, a
// volume's hiccup, a deadline) may pass.
func Terminal(err error) bool {
	for _, e := range []error{ErrCredentials, ErrNoBucket, ErrNoSnapshot, ErrSnapshotDamaged, ErrNoKey} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// readableQuery encodes parameters with ':' and '/' left as they are (RFC 3986 allows both in a
// query): status shows endpoint=http://minio:9000, not endpoint=http%3A%2F%2Fminio%3A9000.
func readableQuery(q url.Values) string {
	return strings.NewReplacer("%3A", ":", "%2F", "/").Replace(q.Encode())
}

// Under is a file destination as a pod sees it, with its claim mounted at mount; other destinations
// are returned unchanged. The spec names file:///dir relative to the claim.
func (d Destination) Under(mount string) Destination {
	if d.Scheme == "file" {
		d.Root = path.Join(mount, d.Root)
	}
	return d
}
