// framegate devices [--json]: the devices this host can run cells on (device discovery
// of matrix/device_discovery.h).
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_file.h"
#include "harness/memory_info.h"
#include "matrix/device_discovery.h"

namespace framegate {
namespace {

nlohmann::json HostToJson(const HostDevices& host) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceInfo& d : host.devices) {
    nlohmann::json j = {{"device", d.device},
                        {"name", d.name},
                        {"capability", d.capability},
                        {"memory_bytes", d.memory_bytes},
                        {"driver", d.driver}};
    if (d.device == "cpu") {
      j["cores"] = host.cpu_cores;
      j["features"] = host.cpu_features;
    }
    devices.push_back(j);
  }
  return {{"devices", devices},
          {"cuda", {{"built_with_cuda", host.built_with_cuda}, {"runtime", host.cuda_runtime}}}};
}

void PrintHost(const HostDevices& host) {
  for (const DeviceInfo& d : host.devices) {
    std::cout << d.device << "  " << d.name << ", ";
    if (d.device.rfind("cpu:", 0) == 0) {
      std::cout << "ATen's " << d.device.substr(4)
                << " CPU kernels (ATEN_CPU_CAPABILITY=" << d.device.substr(4) << ")";
    } else if (d.device == "cpu") {
      std::cout << host.cpu_cores << " cores, " << FormatBytes(d.memory_bytes)
                << ", features: " << (d.capability.empty() ? "none of interest" : d.capability);
    } else {
      std::cout << "capability " << d.capability << ", " << FormatBytes(d.memory_bytes) << ", driver "
                << d.driver;
    }
    std::cout << "\n";
  }
  if (!host.built_with_cuda) {
    std::cout << "cuda  none (this framegate is built without CUDA)\n";
  } else if (host.devices.size() == 1) {
    std::cout << "cuda  no GPU visible (runtime " << host.cuda_runtime << ")\n";
  } else {
    std::cout << "cuda  runtime " << host.cuda_runtime << "\n";
  }
}

}  // namespace

Command AddDevicesCommand(CLI::App& parent) {
  auto json = std::make_shared<std::string>();
  CLI::App* app =
      parent.add_subcommand("devices",
                            "Show the devices cells can run on: the CPU and its ISA features, its ATen "
                            "kernel paths (cpu:avx2, ...), each GPU");
  AddOutputFileOption(app, "--json", json.get(), "Write the devices as JSON");
  return {app, [json] {
            const HostDevices host = DiscoverHost();
            if (!json->empty()) {
              const Status written = WriteOutputFile(*json, HostToJson(host).dump(2) + "\n");
              if (!written.ok()) return ReportError(written);
            }
            if (*json != "-") PrintHost(host);
            return kExitOk;
          }};
}

}  // namespace framegate
