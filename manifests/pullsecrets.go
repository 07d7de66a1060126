package manifests

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Image pull secrets. A pod's spec.imagePullSecrets name Secrets of its namespace that
// hold registry credentials: on a node, those beside the pod in its source. As on the
// kubelet, a name that finds no such Secret does not stop the pod: its pulls go on with
// the node's credentials, and the runner warns. The kubelet also passes over, without a
// word, a Secret that holds no registry credentials (of another type); staticpod warns
// of it too.

// PullSecretTypes are the types of Secret that hold registry credentials, with the key
// that holds them: a docker config.json ({"auths": {...}}) or a legacy .dockercfg (its
// auths alone).
var PullSecretTypes = map[corev1.SecretType]string{
	corev1.SecretTypeDockerConfigJson: corev1.DockerConfigJsonKey,
	corev1.SecretTypeDockercfg:        corev1.DockerConfigKey,
}

// PullSecrets returns the Secrets of objs that pod's spec.imagePullSecrets name, in the
// order it names them, each once; missing are the names of those that are not among
// objs, unusable those that are of a type that holds no registry credentials. Empty
// names are passed over, as the kubelet passes them over.
func PullSecrets(pod *corev1.Pod, objs Objects) (secrets []*corev1.Secret, missing, unusable []string) {
	seen := map[string]bool{}
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" || seen[ref.Name] {
			continue
		}
		seen[ref.Name] = true
		s, ok := objs.Secrets[pod.Namespace+"/"+ref.Name]
		switch {
		case !ok:
			missing = append(missing, ref.Name)
		case PullSecretTypes[s.Type] == "":
			unusable = append(unusable, ref.Name)
		default:
			secrets = append(secrets, s)
		}
	}
	return secrets, missing, unusable
}

// redacted stands for a Secret's value in an error, as the apiserver writes it.
const redacted = "<secret contents redacted>"

// validateDockerConfig checks that a Secret of a pull secret type holds a JSON object
// under its key, as the apiserver does; the error never quotes the value, nor the JSON
// decoder's message, which may quote part of it.
func validateDockerConfig(s *corev1.Secret) field.ErrorList {
	key, ok := PullSecretTypes[s.Type]
	if !ok {
		return nil
	}
	data, ok := s.Data[key]
	if !ok {
		return nil // validateSecret reports the missing key
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("data").Key(key), redacted,
			"must be a JSON object: a docker config file's content")}
	}
	return nil
}
