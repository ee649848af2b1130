// libyaml's parser API (event based). The shim exists so SwiftPM can find the header via pkg-config.
#include <yaml.h>
