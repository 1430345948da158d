package io.mstar.transport.conformance;

/** Which implementation produces and which consumes: every scenario of the conformance matrix runs all four. */
enum Pairing {
    JVM_TO_JVM(Language.JVM, Language.JVM),
    JVM_TO_PYTHON(Language.JVM, Language.PYTHON),
    PYTHON_TO_JVM(Language.PYTHON, Language.JVM),
    PYTHON_TO_PYTHON(Language.PYTHON, Language.PYTHON);

    final Language producer;
    final Language consumer;

    Pairing(Language producer, Language consumer) {
        this.producer = producer;
        this.consumer = consumer;
    }

    boolean usesPython() {
        return producer == Language.PYTHON || consumer == Language.PYTHON;
    }

    @Override
    public String toString() {
        return producer + "→" + consumer;
    }

    /** The two endpoints: the JVM's {@code TensorEndpoint} and the Python package's {@code Endpoint}. */
    enum Language {
        JVM("JVM"),
        PYTHON("Python");

        private final String label;

        Language(String label) {
            this.label = label;
        }

        Language other() {
            return this == JVM ? PYTHON : JVM;
        }

        @Override
        public String toString() {
            return label;
        }
    }
}
