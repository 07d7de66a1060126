package runner

import (
	"context"
	"time"

	"github.com/staticpod/staticpod/api/wire"
	"github.com/staticpod/staticpod/runner/imagegc"
)

// The kubelet's image garbage collection defaults (--image-gc-high-threshold,
// --image-gc-low-threshold, --image-minimum-gc-age) and its period (ImageGCPeriod).
const (
	DefaultImageGCHighThreshold = 85
	DefaultImageGCLowThreshold  = 80
	DefaultImageMinimumGCAge    = 2 * time.Minute
	DefaultImageGCPeriod        = 5 * time.Minute
)

// Event reasons of image garbage collection. FreeDiskSpaceFailed is the kubelet's.
const (
	ReasonImageRemoved        = "ImageGarbageCollected"
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonImageGCFailed       = "ImageGCFailed"
)

// ImageStore is what image garbage collection needs from a runtime, beside Runtime.
type ImageStore interface {
	// ImageFS returns the usage of the filesystem that holds the images' content and
	// unpacked layers.
	ImageFS(ctx context.Context) (FSUsage, error)
	// ListImages returns every image the runtime holds for staticpod, one per image ID
	// with all its names.
	ListImages(ctx context.Context) ([]StoredImage, error)
	// RemoveImage removes every name of the image and returns once what only it used
	// (content, unpacked layers) is deleted. An image already gone is no error.
	RemoveImage(ctx context.Context, img StoredImage) error
	// ImageName returns the name the runtime stores a pod's image under
	// ("busybox" -> "docker.io/library/busybox:latest"), or "" if it names no image.
	ImageName(image string) string
}

// FSUsage is the size and free space of a filesystem, in bytes.
type FSUsage = imagegc.FSUsage

// ImageGCPolicy is the kubelet's image garbage collection policy (imagegc.Policy).
type ImageGCPolicy = imagegc.Policy

// StoredImage is an image in the runtime; clients read it as wire.StoredImage.
type StoredImage = wire.StoredImage

// ImageUse is an image with what garbage collection weighs: whether a known pod needs
// it and when one last did. Clients read it as wire.ImageUse.
type ImageUse = wire.ImageUse
