package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kinds of the objects pods read: ConfigMaps and Secrets given as documents beside the
// pods of the same source, as `kubectl apply -f` takes them to a cluster.
const (
	KindConfigMap    = kindConfigMap
	KindSecret       = kindSecret
	KindRuntimeClass = kindRuntimeClass // cluster-scoped: its ObjectRef has no namespace
)

// maxObjectBytes is the most data one ConfigMap or Secret holds, as the apiserver
// limits them (corev1.MaxSecretSize; a ConfigMap is held to the same).
const maxObjectBytes = corev1.MaxSecretSize

// Objects are the ConfigMaps and Secrets of one source, by namespace/name, and its
// RuntimeClasses, by name. The pods of that source read them through configMap, secret
// and projected volumes, envFrom and env[].valueFrom, and runtimeClassName. Objects are
// never changed once made: a new snapshot makes new ones.
type Objects struct {
	ConfigMaps     map[string]*corev1.ConfigMap
	Secrets        map[string]*corev1.Secret
	RuntimeClasses map[string]*nodev1.RuntimeClass
}

// NewObjects returns an empty set of objects.
func NewObjects() Objects {
	return Objects{ConfigMaps: map[string]*corev1.ConfigMap{}, Secrets: map[string]*corev1.Secret{}, RuntimeClasses: map[string]*nodev1.RuntimeClass{}}
}

// ObjectRef names one ConfigMap, Secret or RuntimeClass.
type ObjectRef struct {
	Kind      string // KindConfigMap or KindSecret
	Namespace string
	Name      string
}

func (r ObjectRef) String() string {
	if r.Namespace == "" { // a RuntimeClass: cluster-scoped
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Data returns the keys of the object ref names with their values (a ConfigMap's data
// and binaryData together), and whether there is such an object.
func (o Objects) Data(ref ObjectRef) (map[string][]byte, bool) {
	key := ref.Namespace + "/" + ref.Name
	switch ref.Kind {
	case KindConfigMap:
		cm, ok := o.ConfigMaps[key]
		if !ok {
			return nil, false
		}
		out := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
		for k, v := range cm.Data {
			out[k] = []byte(v)
		}
		maps.Copy(out, cm.BinaryData)
		return out, true
	case KindSecret:
		s, ok := o.Secrets[key]
		if !ok {
			return nil, false
		}
		return s.Data, true
	}
	return nil, false
}

// Has reports whether the object ref names is there.
func (o Objects) Has(ref ObjectRef) bool {
	_, ok := o.Data(ref)
	return ok
}

// Add adds the objects of a manifest, unless the set has one of the same kind and
// namespace/name already: those are returned, for the caller to report as conflicts
// (the first definition wins, as for pods).
func (o Objects) Add(configMaps []*corev1.ConfigMap, secrets []*corev1.Secret) (taken []ObjectRef) {
	for _, cm := range configMaps {
		key := cm.Namespace + "/" + cm.Name
		if _, ok := o.ConfigMaps[key]; ok {
			taken = append(taken, ObjectRef{KindConfigMap, cm.Namespace, cm.Name})
			continue
		}
		o.ConfigMaps[key] = cm
	}
	for _, s := range secrets {
		key := s.Namespace + "/" + s.Name
		if _, ok := o.Secrets[key]; ok {
			taken = append(taken, ObjectRef{KindSecret, s.Namespace, s.Name})
			continue
		}
		o.Secrets[key] = s
	}
	return taken
}

// AddRuntimeClasses adds RuntimeClasses as Add adds ConfigMaps and Secrets.
func (o *Objects) AddRuntimeClasses(classes []*nodev1.RuntimeClass) (taken []ObjectRef) {
	if o.RuntimeClasses == nil {
		o.RuntimeClasses = map[string]*nodev1.RuntimeClass{}
	}
	for _, rc := range classes {
		if _, ok := o.RuntimeClasses[rc.Name]; ok {
			taken = append(taken, ObjectRef{Kind: KindRuntimeClass, Name: rc.Name})
			continue
		}
		o.RuntimeClasses[rc.Name] = rc
	}
	return taken
}

// Len is how many objects there are.
func (o Objects) Len() int { return len(o.ConfigMaps) + len(o.Secrets) + len(o.RuntimeClasses) }

// Fingerprint identifies the content of the objects: equal sets have equal
// fingerprints, and any change of a name, a key or a value changes it.
func (o Objects) Fingerprint() string {
	if o.Len() == 0 {
		return ""
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(o.ConfigMaps)) {
		cm := o.ConfigMaps[k]
		fmt.Fprintf(h, "configmap %s\n", k)
		writeJSON(h, []any{cm.Data, cm.BinaryData})
	}
	for _, k := range slices.Sorted(maps.Keys(o.Secrets)) {
		fmt.Fprintf(h, "secret %s\n", k)
		writeJSON(h, o.Secrets[k].Data)
	}
	for _, k := range slices.Sorted(maps.Keys(o.RuntimeClasses)) {
		rc := o.RuntimeClasses[k]
		fmt.Fprintf(h, "runtimeclass %s\n", k)
		writeJSON(h, []any{rc.Handler, rc.Overhead})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// defaultConfigMap and defaultSecret fill in what the apiserver would: the namespace,
// a Secret's type, and its stringData merged into data (stringData wins).
func defaultConfigMap(cm *corev1.ConfigMap) {
	if cm.Namespace == "" {
		cm.Namespace = metav1.NamespaceDefault
	}
	cm.Kind, cm.APIVersion = kindConfigMap, "v1"
}

func defaultSecret(s *corev1.Secret) {
	if s.Namespace == "" {
		s.Namespace = metav1.NamespaceDefault
	}
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
	s.Kind, s.APIVersion = kindSecret, "v1"
}

// validateConfigMap checks a defaulted ConfigMap as the apiserver does.
func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := validateObjectMeta(&cm.ObjectMeta)
	size := 0
	for k, v := range cm.Data {
		errs = append(errs, invalidMsgs(field.NewPath("data").Key(k), k, validation.IsConfigMapKey(k))...)
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		errs = append(errs, invalidMsgs(field.NewPath("binaryData").Key(k), k, validation.IsConfigMapKey(k))...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, "duplicate of key present in data"))
		}
		size += len(k) + len(v)
	}
	if size > maxObjectBytes {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxObjectBytes))
	}
	return errs
}

// validateSecret checks a defaulted Secret as the apiserver does, with the keys its
// well-known types require.
func validateSecret(s *corev1.Secret) field.ErrorList {
	errs := validateObjectMeta(&s.ObjectMeta)
	size := 0
	for k, v := range s.Data {
		errs = append(errs, invalidMsgs(field.NewPath("data").Key(k), k, validation.IsConfigMapKey(k))...)
		size += len(v)
	}
	if size > maxObjectBytes {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", maxObjectBytes))
	}
	var required []string
	switch s.Type {
	case corev1.SecretTypeTLS:
		required = []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}
	case corev1.SecretTypeDockerConfigJson:
		required = []string{corev1.DockerConfigJsonKey}
	case corev1.SecretTypeDockercfg:
		required = []string{corev1.DockerConfigKey}
	case corev1.SecretTypeSSHAuth:
		required = []string{corev1.SSHAuthPrivateKey}
	}
	for _, k := range required {
		if _, ok := s.Data[k]; !ok {
			errs = append(errs, field.Required(field.NewPath("data").Key(k), fmt.Sprintf("a Secret of type %s needs it", s.Type)))
		}
	}
	return append(errs, validateDockerConfig(s)...)
}

func validateObjectMeta(meta *metav1.ObjectMeta) field.ErrorList {
	fld := field.NewPath("metadata")
	var errs field.ErrorList
	if meta.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	} else {
		errs = append(errs, invalidMsgs(fld.Child("name"), meta.Name, validation.IsDNS1123Subdomain(meta.Name))...)
	}
	return append(errs, dnsLabel(fld.Child("namespace"), meta.Namespace, true)...)
}
