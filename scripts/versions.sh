# Pinned versions and package lists shared by the bootstrap and CI scripts.
DDP_TORCH_VERSION=2.11.0
DDP_PY_PACKAGES="pytorch-lightning==2.6.6 numpy pytest scikit-learn==1.9.1 scikit-build-core==1.1.2"
DDP_APT_PACKAGES="ccache swig pkg-config cmake g++ zlib1g-dev libgtest-dev libbenchmark-dev iproute2 procps abigail-tools bc doxygen python3-dev openjdk-17-jdk-headless junit4 bindgen maven libmaven-compiler-plugin-java libmaven-resources-plugin-java libmaven-jar-plugin-java libsurefire-java libmaven-install-plugin-java clang libclang-rt-14-dev"
# Changes whenever the Python side of the venv must be reinstalled.
DDP_VENV_STAMP="torch${DDP_TORCH_VERSION}-pl2.6.6-sk1.9.1-skb1.1.2-v3"
